/**
 * The avatar's output sizes: what a session's `output_size` and the server's AVATAR_OUTPUT_SIZE
 * may name. 512x512 is the default (the size the CPU renderer and the benchmarks are tuned for);
 * 720x720 and 1280x720 (landscape, the face centred) cost more per frame (npm run bench -- media).
 */
export const OUTPUT_SIZES = ['512x512', '720x720', '1280x720'] as const;
export type OutputSize = (typeof OUTPUT_SIZES)[number];
export const DEFAULT_OUTPUT_SIZE: OutputSize = '512x512';

/** Width and height in pixels of a named size. */
export function outputDimensions(size: OutputSize): { width: number; height: number } {
  const [width, height] = size.split('x').map(Number) as [number, number];
  return { width, height };
}
