#!/usr/bin/env python3
"""embed.py IN OUT NAME: write IN's bytes as the C string NAME to OUT."""
import sys

src, out, name = sys.argv[1:4]
data = open(src, 'rb').read()
with open(out, 'w') as f:
    f.write('/* Generated from %s by embed.py: edit that file. */\n'
            % src.split('/')[-1])
    f.write('const char %s[] = {\n' % name)
    for i in range(0, len(data), 16):
        f.write('  ' + ''.join('%d,' % b for b in data[i:i + 16]) + '\n')
    f.write('  0\n};\n')
