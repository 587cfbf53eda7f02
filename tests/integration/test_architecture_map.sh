#!/usr/bin/env bash
# docs/architecture.md's "Layout" is the map of the tree: every file under
# gateway/, policy/, proxy/, dns/, exec/ and scripts/ has one line there,
# "- `NAME`: what it is for", under a "### FOLDER/" heading. This fails when a
# file has no line (printing the heading and the line to add, with the start of
# the file's head comment to word it from), when a line names a file that does
# not exist, or when a file has two lines. It first shows, on a copy of the tree
# with one file added and one removed, that it catches both.
set -euo pipefail
src=${TOLLGATE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
mapped_dirs=(gateway policy proxy dns exec scripts)

# A suggested line for FILE: the first sentence of its head comment (C, shell,
# Python, CMake and JavaScript comments), lower-cased at its start as the map's
# lines are; empty when the file has no head comment.
suggest() {
	awk '
		NR == 1 && /^#!/ { next }
		/^[[:space:]]*\/\*/ { c = 1 }
		c || /^[[:space:]]*(#|\/\/)/ {
			line = $0
			gsub(/^[[:space:]]*(\/\*+|\*\/|\*|#|\/\/)[[:space:]]?/, "", line)
			gsub(/\*\/[[:space:]]*$/, "", line)
			if (line != "") text = text (text == "" ? "" : " ") line
			if (c && /\*\//) exit
			if (length(text) > 400) exit
			next
		}
		{ exit }
		END {
			end = match(text, /\.( |$)/)
			if (end) text = substr(text, 1, end)
			if (length(text) > 160) text = substr(text, 1, 157) "..."
			if (substr(text, 2, 1) !~ /[A-Z]/) text = tolower(substr(text, 1, 1)) substr(text, 2)
			print text
		}
	' "$1"
}

# check_map ROOT: prints one message per fault on stderr; fails if any.
check_map() {
	local root=$1 doc=$1/docs/architecture.md faults=0
	local -A mapped=() mapped_line=() gone=()
	local lineno=0 dir="" in_layout=0 line name path
	while IFS= read -r line; do
		lineno=$((lineno + 1))
		if [[ $line == '## Layout' ]]; then
			in_layout=1
			continue
		fi
		((in_layout)) || continue
		if [[ $line == '## '* ]]; then
			break
		fi
		if [[ $line =~ ^'### '([a-z0-9_./-]+/)$ ]]; then
			dir=${BASH_REMATCH[1]}
			continue
		elif [[ $line == '### '* ]]; then
			dir=""
			continue
		fi
		[[ $line =~ ^'- `'([^\`]+)'`: '. ]] || continue
		name=${BASH_REMATCH[1]}
		if [[ -z $dir ]]; then
			echo "docs/architecture.md:$lineno: \`$name\` is under no \"### FOLDER/\" heading" >&2
			faults=$((faults + 1))
			continue
		fi
		path=$dir$name
		if [[ -n ${mapped[$path]:-} ]]; then
			echo "docs/architecture.md:$lineno: $path has a line already (line ${mapped_line[$path]}): remove one" >&2
			faults=$((faults + 1))
			continue
		fi
		mapped[$path]=1
		mapped_line[$path]=$lineno
		if [[ ! -f $root/$path ]]; then
			echo "docs/architecture.md:$lineno: $path does not exist: remove the line \"- \`$name\`: ...\" (or name the file where it is now)" >&2
			gone[${name##*/}]="$path (line $lineno)"
			faults=$((faults + 1))
		fi
	done <"$doc"
	if ((!in_layout)); then
		echo "docs/architecture.md: no \"## Layout\" section" >&2
		return 1
	fi

	local file rel folder base comment
	while IFS= read -r file; do
		rel=${file#"$root"/}
		[[ -n ${mapped[$rel]:-} ]] && continue
		folder=${rel%/*}/
		base=${rel##*/}
		comment=$(suggest "$file")
		{
			if grep -qxF "### $folder" "$doc"; then
				echo "docs/architecture.md: $rel is not in the map; add under \"### $folder\":"
			else
				echo "docs/architecture.md: $rel is not in the map; add a heading \"### $folder\" to \"## Layout\" and under it:"
			fi
			if [[ -n $comment ]]; then
				echo "  - \`$base\`: $comment"
				echo "  (from its head comment: shorten it to what the file is for)"
			else
				echo "  - \`$base\`: <what it is for, in one line>"
				echo "  (it has no head comment: give it one too)"
			fi
			if [[ -n ${gone[$base]:-} ]]; then
				echo "  (or move here the line of ${gone[$base]}, which does not exist)"
			fi
		} >&2
		faults=$((faults + 1))
	done < <(cd "$root" && find "${mapped_dirs[@]}" -type f ! -name '.*' | sort | sed "s|^|$root/|")
	((faults == 0))
}

# The tree itself, checked first so that the altered copy below can be told
# apart from faults the tree already has.
real_rc=0
check_map "$src" 2>"${TMPDIR:-/tmp}/map.$$" || real_rc=$?
real_out=$(cat "${TMPDIR:-/tmp}/map.$$")
rm -f "${TMPDIR:-/tmp}/map.$$"
real_faults=$(grep -c '^docs/architecture.md' <<<"$real_out" || true)

# The check catches a file without a line and a line without a file.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/docs"
cp "$src/docs/architecture.md" "$tmp/docs/"
(cd "$src" && tar cf - "${mapped_dirs[@]}") | (cd "$tmp" && tar xf -)
printf '/*\n * A file the map does not know yet. More words.\n */\n' >"$tmp/gateway/core/zz_unmapped.c"
mkdir -p "$tmp/exec/newfolder"
printf '# Another, in a folder the map has no heading for.\n' >"$tmp/exec/newfolder/gen.cmake"
rm "$tmp/policy/addr.c"
if check_map "$tmp" 2>"$tmp/out"; then
	echo "FAIL: the check passed a tree with an unmapped file and a missing one" >&2
	exit 1
fi
expect=(
	'gateway/core/zz_unmapped.c is not in the map; add under "### gateway/core/":'
	'  - `zz_unmapped.c`: a file the map does not know yet.'
	'exec/newfolder/gen.cmake is not in the map; add a heading "### exec/newfolder/"'
	'  - `gen.cmake`: another, in a folder the map has no heading for.'
	'policy/addr.c does not exist: remove the line "- `addr.c`: ..."'
)
for e in "${expect[@]}"; do
	if ! grep -qxF -- "$e" "$tmp/out" && ! grep -qF -- "$e" "$tmp/out"; then
		echo "FAIL: the check did not say: $e" >&2
		cat "$tmp/out" >&2
		exit 1
	fi
done
faults=$(grep -c '^docs/architecture.md' "$tmp/out")
if ((faults != real_faults + 3)); then
	echo "FAIL: expected $((real_faults + 3)) faults on the altered copy, got $faults:" >&2
	cat "$tmp/out" >&2
	exit 1
fi
echo "ok: the check names an unmapped file, a new folder and a line without a file"

if ((real_rc != 0)); then
	echo "$real_out" >&2
	echo "FAIL: docs/architecture.md's map and the tree disagree (above)" >&2
	exit 1
fi
echo "ok: docs/architecture.md maps every file under ${mapped_dirs[*]}, and only those"
