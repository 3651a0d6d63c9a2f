/** The logger the llama engine writes to: pino's shape (an object first, then a message). */
export interface LlamaEngineLogger {
  info(object: object, message?: string): void;
  warn(object: object, message?: string): void;
  error(object: object, message?: string): void;
}

/** A logger that drops everything, for engines created without one. */
export const silentLogger: LlamaEngineLogger = {
  info: () => {},
  warn: () => {},
  error: () => {},
};
