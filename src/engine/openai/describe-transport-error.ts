/**
 * What went wrong on the way to an upstream, completing "The upstream server of the model 'x' ...",
 * read from the error codes of undici and Node's sockets (also on the error's `cause`).
 * Names neither the address nor anything else from the configuration.
 */
export function describeTransportError(error: unknown): string {
  const code = readCode(error) ?? readCode((error as { cause?: unknown } | undefined)?.cause);
  const protocolFault = describeProtocolFault(error);
  if (protocolFault !== undefined) return protocolFault;
  switch (code) {
    case "ECONNREFUSED":
      return "refused the connection";
    case "UND_ERR_CONNECT_TIMEOUT":
    case "ETIMEDOUT":
      return "did not accept a connection in time";
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return "could not be found (its host name does not resolve)";
    case "ECONNRESET":
    case "EPIPE":
    case "UND_ERR_SOCKET":
    case "UND_ERR_CLOSED":
      return "closed the connection";
    case "EHOSTUNREACH":
    case "ENETUNREACH":
      return "is unreachable";
    default:
      if (code !== undefined && /^(ERR_TLS|ERR_SSL|CERT_|UNABLE_TO_|DEPTH_ZERO|SELF_SIGNED)/.test(code)) {
        return "failed the TLS handshake";
      }
      return "could not be reached";
  }
}

/**
 * Whether the upstream answered something that is not HTTP as undici reads it: not a network
 * fault, and not one another try on the same endpoint would mend (each try may be a generation
 * paid for upstream), so the request moves on to another endpoint.
 */
export function isProtocolFault(error: unknown): boolean {
  return describeProtocolFault(error) !== undefined;
}

/** Whether no connection to the upstream was made in time (`connect_timeout`). */
export function isConnectTimeout(error: unknown): boolean {
  const code = readCode(error) ?? readCode((error as { cause?: unknown } | undefined)?.cause);
  return code === "UND_ERR_CONNECT_TIMEOUT" || code === "ETIMEDOUT";
}

/**
 * Whether the upstream closed or reset the connection (not Tollgate: its aborts carry no such
 * code, and a pool it closed says `UND_ERR_CLOSED`).
 */
export function isConnectionClosed(error: unknown): boolean {
  const code = readCode(error) ?? readCode((error as { cause?: unknown } | undefined)?.cause);
  return code === "ECONNRESET" || code === "EPIPE" || code === "UND_ERR_SOCKET";
}

function describeProtocolFault(error: unknown): string | undefined {
  const code = readCode(error);
  if (code?.startsWith("HPE_") === true || (error instanceof Error && error.name === "HTTPParserError"))
    return "sent a response that is not valid HTTP";
  if (code === "UND_ERR_HEADERS_OVERFLOW") return "sent response headers too large to read";
  if (code === "UND_ERR_RES_CONTENT_LENGTH_MISMATCH")
    return "sent a body whose length does not match its content-length";
  return undefined;
}

function readCode(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" ? code : undefined;
}
