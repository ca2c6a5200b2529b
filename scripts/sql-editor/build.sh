#!/bin/sh
# Rebuilds shoal/web/static/vendor/sql-editor.min.js (CodeMirror 6 + @codemirror/lang-sql,
# MIT) from npm: the versions are pinned in package-lock.json. Needs node and npm; run it
# after changing entry.js or the lock file, and commit the rebuilt bundle.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out="$here/../../shoal/web/static/vendor"
cd "$here"
npm ci --no-audit --no-fund
npx esbuild entry.js --bundle --minify --format=iife --global-name=ShoalSqlEditor \
  --target=es2019 --legal-comments=none --outfile="$out/sql-editor.min.js"
# Every bundled package's licence, as the vendor folder records it.
node -e '
const fs = require("fs"), path = require("path");
const lock = require("./package-lock.json");
const lines = ["Bundled into sql-editor.min.js by scripts/sql-editor/build.sh:"];
for (const [p, meta] of Object.entries(lock.packages)) {
  if (!p || meta.dev || p.includes("esbuild")) continue;
  lines.push(`${p.replace(/^node_modules\//, "")} ${meta.version} ${meta.license || "?"}`);
}
fs.writeFileSync(path.join(process.argv[1], "LICENSE.sql-editor"), lines.join("\n") + "\n\n" +
  fs.readFileSync("node_modules/codemirror/LICENSE", "utf8"));
' "$out"
rm -rf node_modules
