// The prompts the official conformance suite gets and completes.
import { PNG } from "./tools.ts";

export const prompts = [
  {
    name: "test_simple_prompt",
    description: "A simple prompt without arguments",
    get: () => "This is a simple prompt for testing.",
  },
  {
    name: "test_prompt_with_arguments",
    description: "A prompt with two required arguments",
    arguments: [
      { name: "arg1", description: "First test argument", required: true },
      { name: "arg2", description: "Second test argument", required: true },
    ],
    get: ({ arg1, arg2 }: Record<string, string>) => `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'`,
    complete: (_name: string, value: string) =>
      ["paris", "park", "party", "test", "testValue"].filter((word) => word.startsWith(value)),
  },
  {
    name: "test_prompt_with_embedded_resource",
    description: "A prompt that embeds a resource",
    arguments: [{ name: "resourceUri", description: "URI of the resource to embed", required: true }],
    get: ({ resourceUri }: Record<string, string>) => [
      {
        role: "user",
        content: {
          type: "resource",
          resource: { uri: resourceUri, mimeType: "text/plain", text: "Embedded resource content for testing." },
        },
      },
      { role: "user", content: { type: "text", text: "Please process the embedded resource above." } },
    ],
  },
  {
    name: "test_prompt_with_image",
    description: "A prompt with an image",
    get: () => [
      { role: "user", content: { type: "image", data: PNG, mimeType: "image/png" } },
      { role: "user", content: { type: "text", text: "Please analyze the image above." } },
    ],
  },
];
