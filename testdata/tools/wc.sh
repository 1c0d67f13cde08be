#!/bin/sh
# An executable tool: any language works. Its arguments arrive as one line of
# JSON on stdin; what it prints on stdout is the answer; a non-zero exit is an
# error whose text is what it printed on stderr. Lines on stderr become log
# messages ("@debug ..." picks the level); "@progress N/TOTAL message" reports progress.
input=$(cat)
echo "@progress 1/2 reading the text" >&2
# Pull the "text" string out of the JSON (a real tool would use jq or a real language).
text=$(printf '%s' "$input" | sed -n 's/.*"text"[[:space:]]*:[[:space:]]*"\(.*\)".*/\1/p' | sed 's/\\n/\
/g; s/\\"/"/g; s/\\\\/\\/g')
if [ -z "$text" ]; then
  echo "no text to count" >&2
  exit 1
fi
echo "@debug counting ${#text} characters" >&2
echo "@progress 2/2 counting" >&2
printf '%s\n' "$text" | wc -l -w -c | awk '{ printf "lines=%s words=%s bytes=%s\n", $1, $2, $3 - 1 }'
