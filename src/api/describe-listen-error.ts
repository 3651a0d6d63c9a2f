/** `host:port`, an IPv6 host in brackets. */
export function formatHostPort(host: string, port: number): string {
  return `${host.includes(":") ? `[${host}]` : host}:${port}`;
}

/** Why the server could not listen, said with the fix; other errors as they are. */
export function describeListenError(error: unknown, host: string, port: number): unknown {
  const code = (error as { code?: unknown } | null)?.code;
  const where = formatHostPort(host, port);
  switch (code) {
    case "EADDRINUSE":
      return new Error(
        `Another program already listens on ${where}. Stop it, or choose another port with --port, PORT or server.port.`,
        { cause: error },
      );
    case "EADDRNOTAVAIL":
      return new Error(
        `This machine has no address ${host} to listen on. Use 127.0.0.1, 0.0.0.0 or one of its own addresses (--host, HOST or server.host).`,
        { cause: error },
      );
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return new Error(
        `The host name ${host} to listen on does not resolve${code === "EAI_AGAIN" ? " (the name service did not answer)" : ""}. Use an address such as 127.0.0.1 or 0.0.0.0, or a name this machine resolves (--host, HOST or server.host).`,
        { cause: error },
      );
    case "EACCES":
      return new Error(
        `Listening on ${where} needs privileges this process does not have. Use a port above 1023 (--port, PORT or server.port).`,
        { cause: error },
      );
    default:
      return error;
  }
}
