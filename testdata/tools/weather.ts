// Returning a plain object gives the client both a JSON text and structuredContent.
export default {
  title: "Weather",
  description: "Made-up weather for a city (shows structured output)",
  inputSchema: {
    type: "object",
    properties: {
      city: { type: "string", minLength: 1 },
      unit: { enum: ["celsius", "fahrenheit"] },
    },
    required: ["city"],
  },
  outputSchema: {
    type: "object",
    properties: { city: { type: "string" }, temperature: { type: "number" }, unit: { type: "string" } },
    required: ["city", "temperature", "unit"],
  },
  run: ({ city, unit = "celsius" }: { city: string; unit?: string }) => {
    const celsius = [...city].reduce((sum, ch) => sum + ch.charCodeAt(0), 0) % 35;
    const temperature = unit === "celsius" ? celsius : Math.round(celsius * 9 / 5 + 32);
    return { city, temperature, unit };
  },
};
