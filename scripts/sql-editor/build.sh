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
# CodeMirror's default highlight colours read CSS variables (same colours as fallbacks), so
# console.css sets colours that keep 4.5:1 contrast in dark mode too (#708 on dark was 1.6:1).
sed -i -e 's/color:"#708"/color:"var(--sql-keyword,#708)"/' -e 's/color:"#219"/color:"var(--sql-atom,#219)"/' \
  -e 's/color:"#164"/color:"var(--sql-number,#164)"/' -e 's/color:"#a11"/color:"var(--sql-string,#a11)"/' \
  -e 's/color:"#e40"/color:"var(--sql-special,#e40)"/' -e 's/color:"#00f"/color:"var(--sql-definition,#00f)"/' \
  -e 's/color:"#30a"/color:"var(--sql-local,#30a)"/' -e 's/color:"#085"/color:"var(--sql-type,#085)"/' \
  -e 's/color:"#167"/color:"var(--sql-class,#167)"/' -e 's/color:"#256"/color:"var(--sql-macro,#256)"/' \
  -e 's/color:"#00c"/color:"var(--sql-property,#00c)"/' -e 's/color:"#940"/color:"var(--sql-comment,#940)"/' \
  -e 's/color:"#f00"/color:"var(--sql-invalid,#f00)"/' "$out/sql-editor.min.js"
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
