import type { Socket } from "node:net";
import { type buildConnector, Client, type Dispatcher, Pool } from "undici";

/** What an exchange learns of the connection its request goes out on (see {@link createUpstreamPool}). */
export interface UpstreamConnection {
  /**
   * The connection served a request before this one: a kept-alive connection, which the upstream
   * may have closed while it idled, just as this request went out.
   */
  readonly reused: boolean;
  /** Whether anything at all came from the upstream on the connection since this request went out. */
  heardSince(): boolean;
}

/** A dispatch handler told of its request's connection just before `onRequestStart`. */
export interface ConnectionAwareHandler extends Dispatcher.DispatchHandler {
  onConnection?(connection: UpstreamConnection): void;
}

/**
 * An endpoint's pool whose requests learn whether they went out on a kept-alive connection
 * ({@link ConnectionAwareHandler}). undici tells a handler nothing of its connection, and does
 * not resend a POST that met a connection the upstream had just closed (its idle keep-alive
 * timeout ran out as the request was written): the engine does, and must tell that failure from
 * an upstream that resets new connections, which is down. Each of the pool's clients holds one
 * connection at a time (HTTP/1.1 without pipelining, or one HTTP/2 session): it counts the
 * answers that ended on it.
 */
export function createUpstreamPool(origin: string, options: Pool.Options): Pool {
  return new Pool(origin, {
    ...options,
    factory: (url, clientOptions) => new ConnectionTrackingClient(url, clientOptions as ClientOptions),
  });
}

/** What the pool gives its clients: its options, with the connector it built from them. */
type ClientOptions = Client.Options & { connect: buildConnector.connector };

/** The client's current connection and the answers that ended on it. */
interface ConnectionState {
  socket: Socket | undefined;
  answered: number;
}

class ConnectionTrackingClient extends Client {
  readonly #state: ConnectionState;

  constructor(url: URL, options: ClientOptions) {
    const state: ConnectionState = { socket: undefined, answered: 0 };
    const connect = options.connect;
    super(url, {
      ...options,
      connect: (params, callback) =>
        connect(params, (...result) => {
          // Set before undici uses the connection: a request written on it sees it.
          const socket = result[1];
          if (socket !== null) {
            state.socket = socket;
            state.answered = 0;
          }
          callback(...result);
        }),
    });
    this.#state = state;
  }

  override dispatch(options: Dispatcher.DispatchOptions, handler: ConnectionAwareHandler): boolean {
    return super.dispatch(options, trackConnection(this.#state, handler));
  }
}

/** `handler`, told of its connection, and counting its answer on the connection when it ends. */
function trackConnection(
  state: ConnectionState,
  handler: ConnectionAwareHandler,
): Dispatcher.DispatchHandler {
  let socket: Socket | undefined;
  return {
    onRequestStart(controller, context) {
      const current = state.socket;
      socket = current;
      const start = current?.bytesRead ?? 0;
      handler.onConnection?.({
        reused: state.answered > 0,
        heardSince: () => (current?.bytesRead ?? 0) > start,
      });
      handler.onRequestStart?.(controller, context);
    },
    onRequestUpgrade(controller, statusCode, headers, upgraded) {
      handler.onRequestUpgrade?.(controller, statusCode, headers, upgraded);
    },
    onResponseStart(controller, statusCode, headers, statusMessage) {
      handler.onResponseStart?.(controller, statusCode, headers, statusMessage);
    },
    onResponseData(controller, chunk) {
      handler.onResponseData?.(controller, chunk);
    },
    onResponseEnd(controller, trailers) {
      if (socket !== undefined && socket === state.socket) state.answered++;
      handler.onResponseEnd?.(controller, trailers);
    },
    onResponseError(controller, error) {
      handler.onResponseError?.(controller, error);
    },
  };
}
