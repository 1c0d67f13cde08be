// A plugin that forgot its default export.
export const tool = { run: () => "unreachable" };
