#!/usr/bin/env bash
# make pages-docs: the API reference (/docs) and the operator reference (/docs/ops) that the
# binary embeds, built from docs/openapi.yaml and docs/openapi-ops.yaml by the pinned Redocly CLI
# with server/pages/redoc.hbs, and the Redoc bundle both load, from the same pinned install, served
# from this host.
# Usage: pages-docs.sh REDOCLY_DIR OUT (OUT is server/pages/site, or a directory to compare with it).
set -euo pipefail
redocly_dir=$1 out=$2
redocly=$redocly_dir/node_modules/.bin/redocly
mkdir -p "$out/docs" "$out/assets"
build() { # build DOCUMENT PAGE: quiet unless it fails
	local log
	log=$("$redocly" build-docs "$1" --template server/pages/redoc.hbs --theme.openapi.hideDownloadButton --output "$2" 2>&1) || { echo "$log" >&2; return 1; }
}
build docs/openapi.yaml "$out/docs/api.html"
build docs/openapi-ops.yaml "$out/docs/ops.html"
# The page's head is Redocly's: the styles of the rendered reference, which hydration needs, and
# the bundle's script tag, which names Redocly's CDN; the bundle is served from this host instead.
for page in "$out/docs/api.html" "$out/docs/ops.html"; do
	sed -i 's#<script src="https://cdn\.redocly\.com/redoc/v[0-9.]*/bundles/redoc\.standalone\.js"></script>#<script src="/assets/redoc.standalone.js"></script>#' "$page"
	if grep -q 'https://cdn\.' "$page"; then
		echo "pages-docs.sh: $page still loads from a CDN: update the rewrite" >&2
		exit 1
	fi
done
# Nothing is loaded from another origin: the bundle's one such file, Redocly's logo under the
# menu, gets no source (Redoc then leaves the image out), and the source map it names is not
# shipped.
sed -e 's#"https://cdn.redoc.ly/redoc/logo-mini.svg"#""#' -e '/^\/\/# sourceMappingURL=/d' \
	"$redocly_dir/node_modules/redoc/bundles/redoc.standalone.js" >"$out/assets/redoc.standalone.js"
if grep -q 'cdn.redoc.ly' "$out/assets/redoc.standalone.js"; then
	echo "pages-docs.sh: the Redoc bundle still loads from cdn.redoc.ly: update the rewrite" >&2
	exit 1
fi
