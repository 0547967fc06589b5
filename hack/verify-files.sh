#!/usr/bin/env bash
# verify-files.sh: no tracked file is a binary (an ELF, Mach-O or PE executable, or any file with
# a NUL byte or that git itself takes for binary) or larger than 1 MB, unless hack/files.allow
# lists it. It reads what is staged (the index), so a `git add` of a built binary fails before
# the commit does. `make verify` runs it; it also runs alone (hack/verify-files.sh).
#
# Why: a build output committed once stays in every clone and every image build context for
# good (an 84 MB fairway binary was, from da2c87d to 909f899).
set -euo pipefail
cd "$(dirname "$0")/.."
max=$((1024 * 1024))
allow_file=hack/files.allow

# The allow-list: one path glob per line, each under a testdata/ directory (or docs/img/, for the
# documentation's screenshots) and followed by "# why" (where the data comes from, its licence,
# why it must be binary or large).
allow=()
bad_allow=0
while IFS= read -r line || [ -n "$line" ]; do
  line="${line#"${line%%[![:space:]]*}"}"
  [ -z "$line" ] || [ "${line:0:1}" = "#" ] && continue
  glob="${line%%[[:space:]]*}"
  why="${line#"$glob"}"
  case "$glob" in
    */testdata/*|testdata/*|docs/img/*) ;;
    *) echo "$allow_file: $glob: only test data (a path under a testdata/ directory) and documentation images (docs/img/) may be allowed" >&2; bad_allow=1; continue ;;
  esac
  if [[ "$why" != *"#"?* ]]; then
    echo "$allow_file: $glob: say why after a '#' (origin, licence, why binary or large)" >&2; bad_allow=1; continue
  fi
  allow+=("$glob")
done < <([ -f "$allow_file" ] && cat "$allow_file")

allowed() {
  local g
  for g in "${allow[@]+"${allow[@]}"}"; do
    # shellcheck disable=SC2053 # the glob is meant to match
    [[ "$1" == $g ]] && return 0
  done
  return 1
}

# kind PATH: what the staged content of PATH starts with.
kind() {
  local magic
  magic=$(git cat-file blob ":$1" | head -c 4 | od -An -tx1 | tr -d ' \n')
  case "$magic" in
    7f454c46) echo "an ELF executable" ;;
    feedface|feedfacf|cefaedfe|cffaedfe|cafebabe) echo "a Mach-O executable" ;;
    4d5a*) echo "a PE (Windows) executable" ;;
    *) echo "binary content" ;;
  esac
}

declare -A why=()
# Binary: git's own test on the whole staged content (NUL bytes, lone CRs, mostly unprintable:
# "i/-text"), then any NUL byte anywhere; executables of every format contain NUL bytes.
while IFS= read -r -d '' entry; do
  eol="${entry%%$'\t'*}"
  path="${entry#*$'\t'}"
  [[ "$eol" == "i/-text"* ]] && why[$path]="$(kind "$path")"
done < <(git ls-files -z --eol --cached)
while IFS= read -r -d '' path; do
  [ -n "${why[$path]:-}" ] || why[$path]="$(kind "$path")"
done < <(git grep -z --cached -a -l -P '\x00' || true)
# Size: of the staged blob. Symlinks and submodules have no content of their own here.
while read -r size path; do
  if [ "$size" -gt "$max" ]; then
    why[$path]="${why[$path]:+${why[$path]}, }$((size / 1024)) KiB (limit 1024 KiB)"
  fi
done < <(git -c core.quotePath=false ls-files -s | awk -F'\t' '$1 !~ /^(120000|160000) / {split($1, a, " "); print a[2] " " $2}' |
  git cat-file --batch-check='%(objectsize) %(rest)')

failed=$bad_allow
while IFS= read -r -d "" path; do
  allowed "$path" && continue
  echo "verify-files: $path: ${why[$path]}" >&2
  failed=1
done < <([ ${#why[@]} = 0 ] || printf "%s\0" "${!why[@]}" | sort -z)
if [ "$failed" != 0 ]; then
  echo "verify-files: tracked files must be source text under 1 MB. Remove build outputs from the index" >&2
  echo "  (git rm --cached PATH, and ignore them in .gitignore and .dockerignore); list real test data," >&2
  echo "  with its origin and why, in $allow_file." >&2
  exit 1
fi
echo "verify-files: $(git ls-files | wc -l | tr -d ' ') tracked files, none binary or over 1 MB (allow-list: ${#allow[@]} entries)"
