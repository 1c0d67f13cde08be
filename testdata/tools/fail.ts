// A tool that throws: the client gets isError with the message, the server carries on.
export default {
  description: "Always fails (shows how errors reach the client)",
  run: ({ message = "something went wrong" }: { message?: string }) => {
    throw new Error(message);
  },
};
