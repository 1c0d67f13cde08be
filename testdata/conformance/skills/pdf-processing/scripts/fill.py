"""Fills a PDF form's fields from a JSON file (an example script of the pdf-processing skill)."""
import json
import sys

if __name__ == "__main__":
    form, values, out = sys.argv[1:4]
    print(f"would fill {form} with {len(json.load(open(values)))} values into {out}")
