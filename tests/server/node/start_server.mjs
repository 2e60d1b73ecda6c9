// Starts `parallm serve ARGS --port 0` for the node tests and resolves with the port it printed once the model
// is ready (rejects if the server exits first or is not ready within a minute).
import { spawn } from "node:child_process";

export async function startServer(binary, args) {
  const server = spawn(binary, ["serve", ...args, "--port", "0"], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise((resolve, reject) => {
    let out = "";
    let found = null;
    server.stdout.on("data", (d) => {
      out += d;
      const m = out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) found = Number(m[1]);
      if (found && out.includes("model ready")) resolve(found);
    });
    server.on("exit", (code) => reject(new Error(`server exited with ${code}: ${out}`)));
    setTimeout(() => reject(new Error(`server not ready: ${out}`)), 60000).unref();
  });
  return { server, port };
}
