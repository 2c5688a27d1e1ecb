# SPDX-License-Identifier: MIT
# preload_py.py MAPS_OUT - an allocation-heavy, deterministic Python workload for
# test/system/preload: prints digests of what it computed; writes into MAPS_OUT whether
# libtide is mapped in this process.
import collections
import hashlib
import json
import math
import random
import re
import sys
import zlib

random.seed(12345)


def digest(x):
    return hashlib.sha256(repr(x).encode()).hexdigest()[:16]


# dictionaries and strings
d = {}
letters = 'abcdefghij'
for i in range(60000):
    k = ''.join(letters[random.randrange(10)] for _ in range(1 + i % 12))
    d[k] = d.get(k, 0) + i
print('dict', len(d), digest(sorted(d.items())[:2000]))

# a large list, sorted
l = [random.random() for _ in range(200000)]
l.sort()
print('sort', digest(l[::997]))

# big integers
f = math.factorial(4000)
print('factorial', f.bit_length(), hashlib.sha256(hex(f).encode()).hexdigest()[:16], str(f % 10**4000)[:20])

# JSON round trip
obj = [{'id': i, 'name': 'x' * (i % 50), 'vals': list(range(i % 30))} for i in range(15000)]
s = json.dumps(obj, sort_keys=True)
assert json.loads(s) == obj
print('json', len(s), hashlib.sha256(s.encode()).hexdigest()[:16])

# zlib
data = bytes(random.getrandbits(8) for _ in range(100000)) * 8
c = zlib.compress(data, 9)
print('zlib', len(c), zlib.decompress(c) == data)

# regular expressions and a Counter
words = ['alpha', 'beta', 'gamma', 'delta']
text = ' '.join(words[random.randrange(4)] + str(random.randrange(1000)) for _ in range(60000))
print('re', len(re.findall(r'gamma\d{2}\b', text)))
print('counter', digest(sorted(collections.Counter(text.split()).most_common(20))))

# a growing bytearray (realloc) and a big buffer
b = bytearray()
for i in range(60000):
    b += bytes([i & 255]) * (i % 17)
print('bytearray', len(b), hashlib.md5(b).hexdigest()[:16])
big = bytearray(48 * 1024 * 1024)
big[::4096] = b'\x01' * len(big[::4096])
print('big', sum(big[::4096]))

with open('/proc/self/maps') as m:
    loaded = '/libtide.so' in m.read()
with open(sys.argv[1], 'w') as o:
    o.write('libtide mapped: %s\n' % ('yes' if loaded else 'no'))
