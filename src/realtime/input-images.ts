/**
 * The engine's door to image checking: an `input_image` part (a camera frame, a screenshot) is
 * taken only once its image has been validated, and the engine never decodes one itself (the
 * realtime layer imports no media code). The implementation (src/media/input-images.ts) bounds
 * the cost by what the data URL and the image header claim before decoding anything, decodes off
 * the event loop, and hands back the image as models get it.
 */

/** An image that passed the checks, as a language model is given it. */
export interface CheckedImage {
  /** A `data:image/...;base64,` URL: the client's image, or a smaller re-encoding of it. */
  url: string;
  width: number;
  height: number;
  /** Bytes of the image in `url` (decoded from base64). */
  bytes: number;
}

export interface InputImages {
  /**
   * Validates `imageUrl` (the part's `image_url`); rejects with an AppError naming `param` (an
   * unsupported URL, a bad data URL, an image too large in bytes or pixels, one that does not
   * decode; 429 rate_limit_exceeded when too many wait). `detail` bounds the size handed back
   * (OpenAI's vision detail: low is smaller). Never blocks the event loop for longer than
   * reading the header.
   */
  check(imageUrl: string, param: string, detail: 'auto' | 'low' | 'high'): Promise<CheckedImage>;
}
