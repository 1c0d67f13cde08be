// The resources the official conformance suite reads and subscribes to.
import { PNG } from "./tools.ts";

const bytes = (base64: string) => Uint8Array.from(atob(base64), (ch) => ch.charCodeAt(0));

export const resources = [
  {
    uri: "test://static-text",
    name: "static-text",
    description: "A static text resource",
    mimeType: "text/plain",
    read: () => "This is the content of the static text resource.",
  },
  {
    uri: "test://static-binary",
    name: "static-binary",
    description: "A static binary resource (a PNG)",
    mimeType: "image/png",
    read: () => bytes(PNG),
  },
  {
    uri: "test://watched-resource",
    name: "watched-resource",
    description: "A resource that changes every few seconds and can be subscribed to",
    mimeType: "text/plain",
    read: () => `Watched resource content at ${new Date().toISOString()}`,
    watch: (_uri: string, onUpdate: () => void) => {
      const timer = setInterval(onUpdate, 3000);
      return () => clearInterval(timer);
    },
  },
  {
    uriTemplate: "test://template/{id}/data",
    name: "template",
    description: "A resource template with an id",
    mimeType: "application/json",
    read: (_uri: string, { id }: Record<string, string>) =>
      JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }),
    complete: (_name: string, value: string) => ["1", "2", "3", "123"].filter((id) => id.startsWith(value)),
  },
];
