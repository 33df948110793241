#!/usr/bin/env python3
"""Decodes a PNG (stdlib only) and prints what a blank-page check needs.

Usage: check_png.py FILE
Prints one JSON object: {"width", "height", "colours" (distinct pixel values),
"nonwhite" (fraction of pixels that are not pure white)}. Exits 1 with a
message on stderr when the file is not a PNG this decoder reads (8-bit grey,
grey+alpha, RGB or RGBA, not interlaced).
"""

import collections
import json
import struct
import sys
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # colour type -> samples per pixel


def read_chunks(data):
    if not data.startswith(SIGNATURE):
        raise ValueError("not a PNG (bad signature)")
    pos = len(SIGNATURE)
    while pos + 8 <= len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        if zlib.crc32(kind + body) != crc:
            raise ValueError("bad CRC in chunk %r" % kind)
        yield kind, body
        pos += 12 + length


def byte_add(a, b, low, high):
    """Adds two rows held as little-endian ints byte by byte, modulo 256 (no carries between bytes)."""
    return ((a & low) + (b & low)) ^ ((a ^ b) & high)


def unfilter_sub(row, bpp, low, high, mask):
    """Sub: a prefix sum with stride bpp, as a log-step scan on the whole row."""
    x = int.from_bytes(row, "little")
    shift = bpp * 8
    while shift < len(row) * 8:
        x = byte_add(x, (x << shift) & mask, low, high)
        shift *= 2
    return x.to_bytes(len(row), "little")


def unfilter_average(row, prior, bpp):
    out = bytearray(row)
    for i in range(len(out)):
        left = out[i - bpp] if i >= bpp else 0
        out[i] = (out[i] + ((left + prior[i]) >> 1)) & 0xFF
    return bytes(out)


def unfilter_paeth(row, prior, bpp):
    out = bytearray(row)
    for i in range(len(out)):
        a = out[i - bpp] if i >= bpp else 0
        b = prior[i]
        c = prior[i - bpp] if i >= bpp else 0
        p = a + b - c
        pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        predictor = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
        out[i] = (out[i] + predictor) & 0xFF
    return bytes(out)


def decode_rows(raw, width, height, bpp):
    stride = width * bpp
    low = int.from_bytes(b"\x7f" * stride, "little")
    high = int.from_bytes(b"\x80" * stride, "little")
    mask = (1 << (stride * 8)) - 1
    prior = bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, row = raw[start], raw[start + 1:start + 1 + stride]
        if len(row) != stride:
            raise ValueError("image data too short")
        if kind == 1:
            row = unfilter_sub(row, bpp, low, high, mask)
        elif kind == 2:
            row = byte_add(int.from_bytes(row, "little"), int.from_bytes(prior, "little"), low, high).to_bytes(
                stride, "little")
        elif kind == 3:
            row = unfilter_average(row, prior, bpp)
        elif kind == 4:
            row = unfilter_paeth(row, prior, bpp)
        elif kind != 0:
            raise ValueError("bad filter type %d in row %d" % (kind, y))
        yield row
        prior = row


def summarize(path):
    with open(path, "rb") as f:
        data = f.read()
    header, idat = None, []
    for kind, body in read_chunks(data):
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
    if header is None or not idat:
        raise ValueError("missing IHDR or IDAT")
    width, height, depth, colour_type, _, _, interlace = header
    if depth != 8 or colour_type not in CHANNELS or interlace:
        raise ValueError("unsupported PNG: depth %d, colour type %d, interlace %d" % (depth, colour_type, interlace))
    bpp = CHANNELS[colour_type]
    counts = collections.Counter()
    for row in decode_rows(zlib.decompress(b"".join(idat)), width, height, bpp):
        counts.update(zip(*(row[c::bpp] for c in range(bpp))))
    white = counts[(255,) * bpp]
    pixels = width * height
    return {"width": width, "height": height, "colours": len(counts),
            "nonwhite": (pixels - white) / pixels if pixels else 0.0}


def main():
    if len(sys.argv) != 2:
        print("usage: check_png.py FILE", file=sys.stderr)
        return 2
    try:
        print(json.dumps(summarize(sys.argv[1]), sort_keys=True))
    except (OSError, ValueError, zlib.error, struct.error) as e:
        print("check_png: %s: %s" % (sys.argv[1], e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
