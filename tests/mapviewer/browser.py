#!/usr/bin/env python3
"""The map viewer in a real browser.

browser.py MAPVIEWER PCORRUN

Generates a small map, serves it with `mapviewer serve` on a pcor
application of three processes (two daemons: every view comes from the
cluster), opens the page in headless Chromium and drives it over the
DevTools protocol: load, pan (a mouse drag), zoom (a wheel notch).  After
each step the page says which region it shows; the test checks the region
moved as the gesture asks, screenshots the view and compares its pixels
with `mapviewer render` of the same region (a tolerance for JPEG).  Every
process it starts is ended; each step has a deadline.  Exit 0 pass, 1 fail,
77 skip (no chromium).
"""
import base64
import json
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

STEP = 30  # seconds any one step may take
TOL = 0.5  # mean absolute channel difference allowed (the browser's scaling)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def read_line_matching(proc, stream, pattern, deadline):
    """Lines of a child's stream until one matches (or the deadline)."""
    buf = b""
    while time.monotonic() < deadline:
        r, _, _ = select.select([stream], [], [], deadline - time.monotonic())
        if not r:
            break
        chunk = os.read(stream.fileno(), 4096)
        if not chunk:
            break
        buf += chunk
        m = re.search(pattern, buf.decode(errors="replace"))
        if m:
            return m
    fail("no line matching %r (exit %s): %s" % (pattern, proc.poll(),
                                                buf.decode(errors="replace")[-500:]))


class WebSocket:
    """Just enough of RFC 6455 for the DevTools protocol: text frames."""

    def __init__(self, url):
        m = re.match(r"ws://([^:/]+):(\d+)(/.*)", url)
        self.s = socket.create_connection((m.group(1), int(m.group(2))), STEP)
        key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall(("GET %s HTTP/1.1\r\nHost: %s:%s\r\nUpgrade: websocket"
                        "\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                        "Sec-WebSocket-Version: 13\r\n\r\n"
                        % (m.group(3), m.group(1), m.group(2), key)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            c = self.s.recv(1)
            if not c:
                fail("websocket handshake")
            head += c
        if b" 101 " not in head.split(b"\r\n")[0]:
            fail("websocket refused: %r" % head[:80])
        self.next_id = 0

    def _recv_exact(self, n):
        b = b""
        while len(b) < n:
            c = self.s.recv(n - len(b))
            if not c:
                fail("devtools connection closed")
            b += c
        return b

    def send(self, obj):
        data = json.dumps(obj).encode()
        n = len(data)
        hdr = bytes([0x81])
        if n < 126:
            hdr += bytes([0x80 | n])
        elif n < 65536:
            hdr += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            hdr += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.s.sendall(hdr + mask + bytes(b ^ mask[i % 4]
                                          for i, b in enumerate(data)))

    def recv(self):
        msg = b""
        while True:
            b0, b1 = self._recv_exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._recv_exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._recv_exact(8))[0]
            payload = self._recv_exact(n)
            op = b0 & 0x0F
            if op in (0, 1, 2):
                msg += payload
                if b0 & 0x80:
                    return json.loads(msg)
            elif op == 8:
                fail("devtools closed the connection")

    def wait_event(self, method):
        while self.recv().get("method") != method:
            pass

    def call(self, method, **params):
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        while True:
            r = self.recv()
            if r.get("id") == self.next_id:
                if "error" in r:
                    fail("%s: %s" % (method, r["error"]))
                return r["result"]


def main():
    mv, pcorrun = sys.argv[1], sys.argv[2]
    chrome = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chrome:
        print("SKIP: no chromium")
        sys.exit(77)
    tmp = tempfile.mkdtemp()
    procs = []
    try:
        subprocess.run([mv, "gen", "--map", tmp + "/map", "--grid", "3x4",
                        "--seed", "5", "--threads", "2"], check=True, timeout=STEP,
                       stdout=subprocess.DEVNULL)
        srv = subprocess.Popen([pcorrun, "-n", "3", mv, "serve", "--map",
                                tmp + "/map", "--loader", "c", "--port", "0",
                                "--seconds", "120"],
                               stdout=subprocess.PIPE, start_new_session=True)
        procs.append(srv)
        port = int(read_line_matching(srv, srv.stdout,
                                      r"http://127\.0\.0\.1:(\d+)/",
                                      time.monotonic() + STEP).group(1))
        # Wrong requests get 4xx and leave the server standing.
        for path, code in [("/view?x=0&y=0&w=99999&h=10", 400),
                           ("/view?x=zz", 400), ("/nothing", 404),
                           ("/view?x=0&y=0&w=10&h=10&ww=0&wh=5", 400)]:
            try:
                urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path),
                                       timeout=STEP)
                fail("%s accepted" % path)
            except urllib.error.HTTPError as e:
                if e.code != code:
                    fail("%s: HTTP %d, want %d" % (path, e.code, code))
        # Requests that are not HTTP at all, or too big: 4xx or a closed
        # connection, and the server still answers afterwards.
        for raw in [b"GARBAGE\r\n\r\n", b"GET /view?" + b"x" * 200000 +
                    b" HTTP/1.1\r\nHost: a\r\n\r\n",
                    b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: -5\r\n\r\n"]:
            with socket.create_connection(("127.0.0.1", port), STEP) as c:
                try:
                    c.sendall(raw)
                    c.shutdown(socket.SHUT_WR)
                    answer = c.recv(64)
                except OSError:
                    # The server may close before reading it all.
                    answer = b""
                if answer and not re.match(rb"HTTP/1\.[01] 4\d\d", answer):
                    fail("malformed request %r answered %r" % (raw[:20], answer))
        if urllib.request.urlopen("http://127.0.0.1:%d/map.json" % port,
                                  timeout=STEP).status != 200:
            fail("server gone after malformed requests")
        url = ("http://127.0.0.1:%d/#ww=600&wh=600&fmt=png&x=480&y=480&w=960&h=960"
               % port)
        br = subprocess.Popen([chrome, "--headless", "--no-sandbox",
                               "--disable-gpu", "--disable-dev-shm-usage",
                               "--no-first-run", "--hide-scrollbars",
                               "--force-device-scale-factor=1",
                               "--window-size=1000,700",
                               "--user-data-dir=" + tmp + "/profile",
                               "--remote-debugging-port=0", "about:blank"],
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, start_new_session=True)
        procs.append(br)
        dport = read_line_matching(br, br.stderr,
                                   r"DevTools listening on ws://[^:]+:(\d+)/",
                                   time.monotonic() + STEP).group(1)
        targets = json.load(urllib.request.urlopen(
            "http://127.0.0.1:%s/json/list" % dport, timeout=STEP))
        page = [t for t in targets if t["type"] == "page"][0]
        ws = WebSocket(page["webSocketDebuggerUrl"])
        ws.call("Emulation.setDeviceMetricsOverride", width=1000, height=700,
                deviceScaleFactor=1, mobile=False)
        ws.call("Page.enable")
        ws.call("Page.navigate", url=url)
        ws.wait_event("Page.loadEventFired")

        def wait_view(n):
            r = ws.call("Runtime.evaluate",
                        expression="mvShown(%d)" % n, awaitPromise=True,
                        returnByValue=True, timeout=STEP * 1000)
            if "exceptionDetails" in r:
                fail("page: %s" % r["exceptionDetails"])
            return r["result"]["value"]

        def check(st, name):
            r = st["region"]
            shot = ws.call("Page.captureScreenshot", format="png",
                           clip={"x": 0, "y": 0, "width": 600,
                                 "height": 600, "scale": 1})
            with open("%s/%s-shot.png" % (tmp, name), "wb") as f:
                f.write(base64.b64decode(shot["data"]))
            ref = "%s/%s-ref.png" % (tmp, name)
            subprocess.run([mv, "render", "--map", tmp + "/map", "--region",
                            "%d,%d,%d,%d" % (r["x"], r["y"], r["w"], r["h"]),
                            "--window", "600x600", "-o", ref], check=True,
                           timeout=STEP, stdout=subprocess.DEVNULL)
            c = subprocess.run([mv, "cmp", ref, "%s/%s-shot.png" % (tmp, name),
                                str(TOL)], timeout=STEP,
                               capture_output=True, text=True)
            print(name, r, c.stdout.strip())
            if c.returncode != 0:
                fail("%s: the page's pixels differ from the CLI render" % name)
            return ref

        st = wait_view(1)
        if st["region"] != {"x": 480, "y": 480, "w": 960, "h": 960}:
            fail("load: region %s" % st["region"])
        ref1 = check(st, "load")
        # The side panel names the daemons that made the parts and times.
        panel = ws.call("Runtime.evaluate", returnByValue=True,
                        expression="document.getElementById('who').innerText"
                        " + '|' + document.getElementById('time').innerText"
                        )["result"]["value"]
        if ("daemon 0" not in panel or "daemon 1" not in panel or
                "imgCLoader" not in panel or " ms" not in panel):
            fail("the page does not say who rendered what: %r" % panel)

        # Pan: drag from (300, 300) to (200, 250); at 1.6 map pixels per
        # screen pixel the region moves right 160 and down 80.
        ws.call("Input.dispatchMouseEvent", type="mousePressed", x=300, y=300,
                button="left", clickCount=1)
        ws.call("Input.dispatchMouseEvent", type="mouseMoved", x=250, y=275,
                button="left")
        ws.call("Input.dispatchMouseEvent", type="mouseMoved", x=200, y=250,
                button="left")
        ws.call("Input.dispatchMouseEvent", type="mouseReleased", x=200,
                y=250, button="left", clickCount=1)
        st = wait_view(2)
        if st["region"] != {"x": 640, "y": 560, "w": 960, "h": 960}:
            fail("pan: region %s" % st["region"])
        check(st, "pan")
        # The comparison can fail: the old view is not the new one.
        c = subprocess.run([mv, "cmp", ref1, tmp + "/pan-shot.png",
                            str(TOL)], timeout=STEP, capture_output=True)
        if c.returncode == 0:
            fail("pan: the screenshot still matches the first view")

        # Zoom in one notch about (300, 300): 1.6 -> 1.28 pixels per pixel.
        ws.call("Input.dispatchMouseEvent", type="mouseWheel", x=300, y=300,
                deltaX=0, deltaY=-100)
        st = wait_view(3)
        r = st["region"]
        if r["w"] != 768 or r["h"] != 768 or abs(r["x"] - (640 + 96)) > 1:
            fail("zoom: region %s" % r)
        check(st, "zoom")
        try:
            ws.call("Browser.close")
        except SystemExit:
            pass
        print("PASS: browser")
    finally:
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        if not os.environ.get("MV_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("kept", tmp)


if __name__ == "__main__":
    main()
