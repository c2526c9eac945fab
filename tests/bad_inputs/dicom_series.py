"""A small DICOM Part 10 writer, the Python twin of tests/dicom_writer.h:
one CT image slice per file, explicit VR little endian. The file is the
128-byte preamble, "DICM", the group 0002 meta information, then the
image's elements in ascending tag order: tag (u16 group, u16 element), the
two VR letters, a u16 length (for OB/OW/SQ/UN/UT two zero bytes and a u32
length), the value padded to an even length (UIDs and OB with NUL, text
with a space). Used by make_inputs.py (the bad-input suite) and
tests/cli_dicom.sh."""
import os
import struct

LONG_VRS = (b"OB", b"OW", b"SQ", b"UN", b"UT")
SERIES = "1.2.826.0.1.3680043.2.1125.1"


def elem(group, element, vr, value):
    if isinstance(value, str):
        value = value.encode()
    if len(value) % 2:
        value += b"\0" if vr in (b"UI", b"OB") else b" "
    head = struct.pack("<HH", group, element) + vr
    if vr in LONG_VRS:
        head += struct.pack("<HI", 0, len(value))
    else:
        head += struct.pack("<H", len(value))
    return head + value


def ds(*values):
    return "\\".join("%.10g" % v for v in values)


def us(v):
    return struct.pack("<H", v)


def slice_bytes(rows, cols, z=0.0, pixels=None, bits=16, stored=None, signed=False,
                ipp=None, iop=(1, 0, 0, 0, 1, 0), spacing=(1, 1), rescale=None,
                series=SERIES, instance=1, spp=1, frames=1, pixel_bytes=None):
    """One slice. pixels: bytes (rows*cols samples, little endian) or None
    for zeros. spacing: DICOM's order (between rows, between columns).
    rescale: (slope, intercept) or None. ipp: a string overrides the
    position (0, 0, z)."""
    sop = "%s.%d" % (series, instance)
    meta = (elem(2, 1, b"OB", b"\0\1") + elem(2, 2, b"UI", "1.2.840.10008.5.1.4.1.1.2")
            + elem(2, 3, b"UI", sop) + elem(2, 0x10, b"UI", "1.2.840.10008.1.2.1")
            + elem(2, 0x12, b"UI", "1.2.826.0.1.3680043.2.1125.99"))
    out = b"\0" * 128 + b"DICM" + elem(2, 0, b"UL", struct.pack("<I", len(meta))) + meta
    stored = stored or bits
    out += elem(8, 0x16, b"UI", "1.2.840.10008.5.1.4.1.1.2") + elem(8, 0x18, b"UI", sop)
    out += elem(8, 0x60, b"CS", "CT") + elem(0x10, 0x10, b"PN", "Phantom^Sphere")
    out += elem(0x20, 0xd, b"UI", "1.2.826.0.1.3680043.2.1125.2") + elem(0x20, 0xe, b"UI", series)
    out += elem(0x20, 0x13, b"IS", str(instance))
    out += elem(0x20, 0x32, b"DS", ipp if isinstance(ipp, str) else ds(*(ipp or (0, 0, z))))
    out += elem(0x20, 0x37, b"DS", ds(*iop))
    out += elem(0x28, 2, b"US", us(spp))
    out += elem(0x28, 4, b"CS", "RGB" if spp == 3 else "MONOCHROME2")
    if spp > 1:
        out += elem(0x28, 6, b"US", us(0))
    if frames > 1:
        out += elem(0x28, 8, b"IS", str(frames))
    out += elem(0x28, 0x10, b"US", us(rows)) + elem(0x28, 0x11, b"US", us(cols))
    out += elem(0x28, 0x30, b"DS", ds(*spacing))
    out += elem(0x28, 0x100, b"US", us(bits)) + elem(0x28, 0x101, b"US", us(stored))
    out += elem(0x28, 0x102, b"US", us(stored - 1)) + elem(0x28, 0x103, b"US", us(1 if signed else 0))
    if rescale is not None:
        slope = rescale[0] if isinstance(rescale[0], str) else ds(rescale[0])
        out += elem(0x28, 0x1052, b"DS", ds(rescale[1])) + elem(0x28, 0x1053, b"DS", slope)
    n = rows * cols * spp * frames * bits // 8 if pixel_bytes is None else pixel_bytes
    pixels = ((pixels or b"") + b"\0" * n)[:n]
    return out + elem(0x7fe0, 0x10, b"OW" if bits > 8 else b"OB", pixels)


def write_series(directory, slices):
    """slices: {file name: bytes}; creates the directory."""
    os.makedirs(directory, exist_ok=True)
    for name, data in slices.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)


def axial(n, rows=4, cols=5, step=2.5, **kw):
    """n axial slices s0.dcm ... at z = 0, step, ...: {name: bytes}."""
    return {"s%d.dcm" % k: slice_bytes(rows, cols, z=k * step, instance=k + 1, **kw)
            for k in range(n)}
