// *_test.* files are tests, never tools.
throw new Error("good_test.ts must not be loaded");
