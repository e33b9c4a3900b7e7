#!/usr/bin/env bash
# Regenerates corpus.txt, the text the demo model's sentencepiece tokenizer is trained on at build
# time (and the golden tokenizer fixture in tests/golden/tokenizer). Run once by a developer; the
# output is committed so that builds never depend on what a machine has installed.
#
# Sources, all redistributable verbatim: Debian's bible-kjv (the King James Version, public
# domain), the licence texts in /usr/share/common-licenses (whose terms permit verbatim copies),
# and modern_english.txt beside this script (written for this project).
# Needs: apt-get install bible-kjv
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="$here/corpus.txt"
{
  for book in Ruth Proverbs Ecclesiastes Mark John; do
    bible -f "${book}1:1-${book}200:200" 2>/dev/null | sed -E 's/^[0-9A-Za-z]+[0-9]+:[0-9]+ //'
  done
  for licence in GPL-3 GPL-2 LGPL-2.1 LGPL-3 Apache-2.0 MPL-2.0 Artistic CC0-1.0 GFDL-1.3; do
    cat "/usr/share/common-licenses/$licence"
  done
  cat "$here/modern_english.txt"
} | sed -E 's/[[:space:]]+$//' | grep -v '^$' > "$out"
wc -c "$out"
