// Files starting with _ are helpers, never tools: loading this would fail the test.
throw new Error("_helper.ts must not be loaded");
