/** How far a download is; reported after every chunk written (reporters throttle). */
export interface DownloadProgress {
  /** Bytes of the file on disk, including those kept from an earlier, interrupted attempt. */
  receivedBytes: number;
  /** Size of the whole file; `undefined` when the server does not say. */
  totalBytes: number | undefined;
  /** Bytes that were already on disk when this attempt started (0 for a fresh start). */
  startBytes: number;
}

/** Listeners of a download: progress figures and one-line notices (resuming, retrying, waiting). */
export interface DownloadListener {
  onProgress?(progress: DownloadProgress): void;
  onNotice?(message: string): void;
}
