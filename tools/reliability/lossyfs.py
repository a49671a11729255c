"""A FUSE pass-through that keeps unsynced writes in memory (a disk with a volatile cache).

File data written through the mount stays in this process's memory until the
file is fsynced (``fsync``/``fdatasync``), which writes its dirty blocks to the
backing directory and fsyncs them there. Killing this process (SIGKILL) is a
power loss: every write not yet synced is gone. Directory operations (create,
mkdir, rename, unlink) go straight to the backing directory: this harness
simulates the loss of unsynced file data, not of unsynced directory entries.

    python -m tools.reliability.lossyfs BACKING MOUNTPOINT   # runs in the foreground
"""

from __future__ import annotations

import errno
import os
import sys
import threading
from typing import Any

import mfusepy as fuse

BLOCK = 4096


class LossyFS(fuse.Operations):  # type: ignore[misc]
    """Pass-through with a per-file dirty-block cache, flushed only on fsync."""

    use_ns = True

    def __init__(self, backing: str) -> None:
        self.root = os.path.realpath(backing)
        self._mutex = threading.RLock()
        self.dirty: dict[str, dict[int, bytearray]] = {}  # path -> block number -> data
        self.size: dict[str, int] = {}  # logical size while dirty

    def _real(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    # -- metadata (straight through) --------------------------------------------

    def getattr(self, path: str, fh: Any = None) -> dict[str, Any]:
        st = os.lstat(self._real(path))
        attrs = {
            k: getattr(st, k)
            for k in (
                "st_mode",
                "st_nlink",
                "st_uid",
                "st_gid",
                "st_size",
                "st_atime_ns",
                "st_mtime_ns",
                "st_ctime_ns",
            )
        }
        for k in ("st_atime", "st_mtime", "st_ctime"):
            attrs[k] = attrs.pop(k + "_ns")
        with self._mutex:
            if path in self.size:
                attrs["st_size"] = self.size[path]
        return attrs

    def readdir(self, path: str, fh: Any) -> list[str]:
        return [".", "..", *os.listdir(self._real(path))]

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._real(path), amode):
            raise fuse.FuseOSError(errno.EACCES)
        return 0

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._real(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self._real(path), uid, gid)
        return 0

    def utimens(self, path: str, times: Any = None) -> int:
        os.utime(self._real(path), ns=times)
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        os.mkdir(self._real(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        os.rmdir(self._real(path))
        return 0

    def unlink(self, path: str) -> int:
        with self._mutex:
            self.dirty.pop(path, None)
            self.size.pop(path, None)
        os.unlink(self._real(path))
        return 0

    def rename(self, old: str, new: str) -> int:
        self.fsync(old, False, None)
        os.rename(self._real(old), self._real(new))
        return 0

    def statfs(self, path: str) -> dict[str, Any]:
        st = os.statvfs(self._real(path))
        return {
            k: getattr(st, k)
            for k in (
                "f_bavail",
                "f_bfree",
                "f_blocks",
                "f_bsize",
                "f_favail",
                "f_ffree",
                "f_files",
                "f_flag",
                "f_frsize",
                "f_namemax",
            )
        }

    def fsyncdir(self, path: str, datasync: bool, fh: Any) -> int:
        fd = os.open(self._real(path), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return 0

    # -- files -------------------------------------------------------------------

    def open(self, path: str, flags: int) -> int:
        return 0

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        fd = os.open(self._real(path), os.O_WRONLY | os.O_CREAT, mode)
        os.close(fd)
        return 0

    def _backing_size(self, path: str) -> int:
        return os.stat(self._real(path)).st_size

    def read(self, path: str, size: int, offset: int, fh: Any) -> bytes:
        with self._mutex:
            logical = self.size.get(path)
            blocks = self.dirty.get(path, {})
            if logical is None:
                logical = self._backing_size(path)
            end = min(offset + size, logical)
            if end <= offset:
                return b""
            with open(self._real(path), "rb") as f:
                f.seek(offset)
                data = bytearray(f.read(end - offset))
            data.extend(b"\0" * (end - offset - len(data)))
            first, last = offset // BLOCK, (end - 1) // BLOCK
            for n in range(first, last + 1):
                block = blocks.get(n)
                if block is None:
                    continue
                lo, hi = max(offset, n * BLOCK), min(end, (n + 1) * BLOCK)
                data[lo - offset : hi - offset] = block[lo - n * BLOCK : hi - n * BLOCK]
            return bytes(data)

    def _block(self, path: str, n: int) -> bytearray:
        blocks = self.dirty.setdefault(path, {})
        block = blocks.get(n)
        if block is None:
            with open(self._real(path), "rb") as f:
                f.seek(n * BLOCK)
                block = bytearray(f.read(BLOCK))
            block.extend(b"\0" * (BLOCK - len(block)))
            blocks[n] = block
        return block

    def write(self, path: str, data: bytes, offset: int, fh: Any) -> int:
        with self._mutex:
            pos = 0
            while pos < len(data):
                n = (offset + pos) // BLOCK
                within = (offset + pos) % BLOCK
                take = min(BLOCK - within, len(data) - pos)
                self._block(path, n)[within : within + take] = data[pos : pos + take]
                pos += take
            current = self.size.get(path, self._backing_size(path))
            self.size[path] = max(current, offset + len(data))
        return len(data)

    def truncate(self, path: str, length: int, fh: Any = None) -> int:
        self.fsync(path, False, fh)
        os.truncate(self._real(path), length)
        return 0

    def fsync(self, path: str, datasync: Any, fh: Any) -> int:
        with self._mutex:
            blocks = self.dirty.pop(path, {})
            logical = self.size.pop(path, None)
            if not blocks and logical is None:
                return 0
            fd = os.open(self._real(path), os.O_WRONLY)
            try:
                for n, block in sorted(blocks.items()):
                    length = BLOCK if logical is None else max(0, min(BLOCK, logical - n * BLOCK))
                    os.pwrite(fd, bytes(block[:length]), n * BLOCK)
                if logical is not None and os.fstat(fd).st_size < logical:
                    os.ftruncate(fd, logical)
                os.fsync(fd)
            finally:
                os.close(fd)
        return 0

    def flush(self, path: str, fh: Any) -> int:
        return 0  # close() does not make data durable

    def release(self, path: str, fh: Any) -> int:
        return 0


def main(backing: str, mountpoint: str) -> None:
    """Mount in the foreground until unmounted or killed."""
    fuse.FUSE(LossyFS(backing), mountpoint, foreground=True, nothreads=False)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
