/**
 * The order shared models serve their queues in (Whisper's gate, the local model's sequences):
 * confirmed work before speculative work (a pause's transcript or reply whose turn may go on),
 * each in arrival order. Whether an entry is speculative is read at the moment the next one is
 * chosen: a speculation whose turn was confirmed while it waited counts as confirmed.
 */
export function takeNext<T extends { speculative: () => boolean }>(queue: T[]): T | undefined {
  const confirmed = queue.findIndex((entry) => !entry.speculative());
  return queue.splice(confirmed >= 0 ? confirmed : 0, 1)[0];
}
