/** A failure `mq-gateway ctl` explains in one line; `code` is its exit code (1 refused or not found, 2 nothing to talk to). */
export class CtlError extends Error {
  constructor(
    message: string,
    readonly code = 1,
  ) {
    super(message);
  }
}
