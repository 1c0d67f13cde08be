#!/usr/bin/env python3
"""An executable tool in Python: JSON arguments on stdin, the answer on stdout.

A stdout that is one CallToolResult object ({"content": [...]}) is used as it is,
so a script can return structured content too.
"""
import json
import sys

args = json.loads(sys.stdin.readline() or "{}")
print("@info shouting", file=sys.stderr)
shouted = args["text"].upper() + "!" * args.get("excitement", 1)
print(json.dumps({
    "content": [{"type": "text", "text": shouted}],
    "structuredContent": {"shouted": shouted},
}))
