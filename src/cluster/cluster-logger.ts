/** What the cluster code logs to: pino's shape (an object first, then a message). */
export interface ClusterLogger {
  info(object: object, message?: string): void;
  warn(object: object, message?: string): void;
  error(object: object, message?: string): void;
}
