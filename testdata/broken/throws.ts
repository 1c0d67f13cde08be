// A plugin whose module throws while it loads.
throw new Error("plugin exploded at import");
