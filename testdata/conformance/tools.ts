// The tools the official conformance suite calls by name (see ../../README.md, "Conformance").
import type { ToolContext } from "../../mcp.ts";

// A 1x1 PNG and a tiny WAV, base64.
export const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=";
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export default [
  {
    name: "test_simple_text",
    description: "Returns a simple text",
    run: () => "This is a simple text response for testing.",
  },
  {
    name: "test_image_content",
    description: "Returns an image",
    run: () => ({ content: [{ type: "image", data: PNG, mimeType: "image/png" }] }),
  },
  {
    name: "test_audio_content",
    description: "Returns audio",
    run: () => ({ content: [{ type: "audio", data: WAV, mimeType: "audio/wav" }] }),
  },
  {
    name: "test_embedded_resource",
    description: "Returns an embedded resource",
    run: () => ({
      content: [{
        type: "resource",
        resource: {
          uri: "test://embedded-resource",
          mimeType: "text/plain",
          text: "This is an embedded resource content.",
        },
      }],
    }),
  },
  {
    name: "test_multiple_content_types",
    description: "Returns text, an image and a resource",
    run: () => ({
      content: [
        { type: "text", text: "Multiple content types test:" },
        { type: "image", data: PNG, mimeType: "image/png" },
        {
          type: "resource",
          resource: {
            uri: "test://mixed-content-resource",
            mimeType: "application/json",
            text: '{"test":"data","value":123}',
          },
        },
      ],
    }),
  },
  {
    name: "test_tool_with_logging",
    description: "Logs three messages while it runs",
    run: async (_args: unknown, ctx: ToolContext) => {
      ctx.log("info", "Tool execution started");
      await sleep(50);
      ctx.log("info", "Tool processing data");
      await sleep(50);
      ctx.log("info", "Tool execution completed");
      return "Tool with logging executed successfully";
    },
  },
  {
    name: "test_tool_with_progress",
    description: "Reports progress 0, 50 and 100 of 100",
    run: async (_args: unknown, ctx: ToolContext) => {
      ctx.progress(0, 100);
      await sleep(50);
      ctx.progress(50, 100);
      await sleep(50);
      ctx.progress(100, 100);
      return "Tool with progress executed successfully";
    },
  },
  {
    name: "test_error_handling",
    description: "Always fails",
    run: () => {
      throw new Error("This tool intentionally returns an error for testing");
    },
  },
  {
    name: "test_sampling",
    description: "Asks the client's LLM",
    inputSchema: { type: "object", properties: { prompt: { type: "string" } }, required: ["prompt"] },
    run: async ({ prompt }: { prompt: string }, ctx: ToolContext) => {
      const result = await ctx.sample({
        messages: [{ role: "user", content: { type: "text", text: prompt } }],
        maxTokens: 100,
      });
      const content = result.content as { text?: string } | undefined;
      return `LLM response: ${content?.text ?? JSON.stringify(result.content)}`;
    },
  },
  {
    name: "test_elicitation",
    description: "Asks the client's user",
    inputSchema: { type: "object", properties: { message: { type: "string" } }, required: ["message"] },
    run: async ({ message }: { message: string }, ctx: ToolContext) => {
      const result = await ctx.elicit({
        message,
        requestedSchema: {
          type: "object",
          properties: {
            username: { type: "string", description: "User's response" },
            email: { type: "string", description: "User's email address" },
          },
          required: ["username", "email"],
        },
      });
      return `User response: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`;
    },
  },
  {
    name: "test_elicitation_sep1034_defaults",
    description: "Elicits with a default for every primitive type",
    run: async (_args: unknown, ctx: ToolContext) => {
      const result = await ctx.elicit({
        message: "Please review and update the form fields with defaults",
        requestedSchema: {
          type: "object",
          properties: {
            name: { type: "string", description: "User name", default: "John Doe" },
            age: { type: "integer", description: "User age", default: 30 },
            score: { type: "number", description: "User score", default: 95.5 },
            status: {
              type: "string",
              description: "User status",
              enum: ["active", "inactive", "pending"],
              default: "active",
            },
            verified: { type: "boolean", description: "Verification status", default: true },
          },
        },
      });
      return `Elicitation completed: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`;
    },
  },
  {
    name: "test_elicitation_sep1330_enums",
    description: "Elicits with all five enum variants",
    run: async (_args: unknown, ctx: ToolContext) => {
      const result = await ctx.elicit({
        message: "Please select options from the enum fields",
        requestedSchema: {
          type: "object",
          properties: {
            untitledSingle: { type: "string", description: "Select one", enum: ["option1", "option2", "option3"] },
            titledSingle: {
              type: "string",
              description: "Select one (titled)",
              oneOf: [
                { const: "value1", title: "First Option" },
                { const: "value2", title: "Second Option" },
                { const: "value3", title: "Third Option" },
              ],
            },
            legacyEnum: {
              type: "string",
              description: "Select one (legacy)",
              enum: ["opt1", "opt2", "opt3"],
              enumNames: ["Option One", "Option Two", "Option Three"],
            },
            untitledMulti: {
              type: "array",
              description: "Select several",
              items: { type: "string", enum: ["option1", "option2", "option3"] },
            },
            titledMulti: {
              type: "array",
              description: "Select several (titled)",
              items: {
                anyOf: [
                  { const: "value1", title: "First Choice" },
                  { const: "value2", title: "Second Choice" },
                  { const: "value3", title: "Third Choice" },
                ],
              },
            },
          },
        },
      });
      return `Elicitation completed: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`;
    },
  },
  {
    // json-schema-2020-12 (not scored: pending): every keyword below must reach tools/list unchanged (SEP-1613,
    // SEP-2106); the suite only lists it.
    name: "json_schema_2020_12_tool",
    description: "Tool with JSON Schema 2020-12 features",
    inputSchema: {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      $defs: {
        address: {
          $anchor: "addressDef",
          type: "object",
          properties: { street: { type: "string" }, city: { type: "string" } },
        },
      },
      properties: {
        name: { type: "string" },
        address: { $ref: "#/$defs/address" },
        contactMethod: { type: "string", enum: ["phone", "email"] },
        phone: { type: "string" },
        email: { type: "string" },
      },
      allOf: [{ anyOf: [{ required: ["phone"] }, { required: ["email"] }] }],
      if: { properties: { contactMethod: { const: "phone" } }, required: ["contactMethod"] },
      then: { required: ["phone"] },
      else: { required: ["email"] },
      additionalProperties: false,
    },
    run: (args: unknown) => ({ content: [{ type: "text", text: JSON.stringify(args) }] }),
  },
  {
    // server-sse-polling (2025-11-25, not scored: pending) calls it on a POST SSE stream and expects the server to
    // close that stream before the result (SEP-1699) and deliver the result when the client reconnects with
    // Last-Event-ID. The closing is the server's part; this only takes long enough for it to happen.
    name: "test_reconnection",
    description: "Answers after a short wait (the server may close the SSE stream meanwhile)",
    run: async (_args: unknown, ctx: ToolContext) => {
      ctx.log("info", "test_reconnection: waiting");
      await sleep(500);
      return "Reconnection test completed";
    },
  },
];
