"""Archives (ZIP, TAR, gzip): members become child objects, within member, size and ratio limits."""

from __future__ import annotations

import gzip
import io
import posixpath
import tarfile

from shoal.extract.base import Child, Context, Extraction, ExtractionRefused, Extractor, TextPart
from shoal.extract.safety import bounded_read, check_zip


class Archive(Extractor):
    name = "archive"
    version = "1"

    def run(self, ctx: Context) -> Extraction:
        limit = ctx.settings.max_unpacked_mb << 20
        children: list[Child] = []
        mt = ctx.obj.media_type
        if mt == "application/zip":
            zf = check_zip(ctx.data, ctx.settings)
            for info in zf.infolist():
                if not info.is_dir():
                    children.append(Child(info.filename, zf.read(info)))
        elif mt in ("application/gzip", "application/x-gzip"):
            data = bounded_read(gzip.GzipFile(fileobj=io.BytesIO(ctx.data)), limit, "gzip stream")
            if data[257:262] == b"ustar":
                children.extend(self._tar(data, ctx))
            else:
                name = ctx.obj.file_name[:-3] if ctx.obj.file_name.endswith(".gz") else ctx.obj.file_name + ".out"
                children.append(Child(name, data))
        else:
            children.extend(self._tar(ctx.data, ctx))
        members = [c.name for c in children]
        return Extraction(
            text=[TextPart("members", "\n".join(members))],
            children=children,
            properties={"members": len(members)},
        )

    def _tar(self, data: bytes, ctx: Context) -> list[Child]:
        out, total = [], 0
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tf:
            for i, member in enumerate(tf):
                if i >= ctx.settings.max_members:
                    raise ExtractionRefused(f"archive has more than {ctx.settings.max_members} members")
                if not member.isfile():
                    continue  # links and devices are never followed
                total += member.size
                if total > ctx.settings.max_unpacked_mb << 20:
                    raise ExtractionRefused(
                        f"archive unpacks to more than {ctx.settings.max_unpacked_mb} MiB: decompression bomb"
                    )
                f = tf.extractfile(member)
                if f is not None:
                    out.append(Child(posixpath.normpath(member.name).lstrip("/"), f.read()))
        return out
