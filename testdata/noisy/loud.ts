import process from "node:process";

// Prints to stdout in every way a careless plugin could: none of it may reach the protocol stream.
console.log("loud: loading");
export default {
  description: "Writes to stdout and returns a value",
  run: () => {
    console.log("loud: console.log");
    console.info("loud: console.info");
    console.debug("loud: console.debug");
    process.stdout.write("loud: process.stdout.write\n");
    return "quiet result";
  },
};
