#!/bin/sh
# Runs examples/engine.awk as an engine:
#   seabattle bot --server HOST:PORT --engine 'sh examples/engine.sh'
# mawk (Debian's and Ubuntu's awk) reads a pipe in blocks unless told -W interactive, and would
# wait for more requests before answering the first; gawk and busybox awk read lines as they come.
here=$(dirname "$0")
if awk -W version 2>/dev/null | grep -q mawk; then
    exec awk -W interactive -f "$here/engine.awk"
fi
exec awk -f "$here/engine.awk"
