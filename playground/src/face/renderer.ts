/**
 * The face drawn in the browser with WebGL2: the frames the server's CPU renderer
 * (`native/face-render`) draws, from the face it sends (`ClientFace`) and one `FaceFrame` per
 * frame, so a client can show the avatar from a few numbers a frame instead of video.
 *
 * Per frame: `geometry.ts` moves the vertices and sets up the triangles and openings on the CPU,
 * exactly as `renderer.rs` does; then, on the GPU, at the warp canvas' size: the cached fitted
 * photo is copied, the triangles with a moving vertex are re-warped over it, each eye and the
 * mouth opening is filled (drawn into a scratch target from the frame so far, then copied back,
 * so each blends over what is below it exactly once), and with an upsample factor above 1 the
 * canvas is upscaled to the output. The result is copied to the canvas (flipped: targets are
 * stored top row first).
 *
 * Invariants: the same face and frame give the native renderer's bytes (see `shaders.ts`); the
 * canvas is sized to the output; GL objects are made per face, never per frame.
 *
 * Not here: decoding the face's wire form, timing frames, falling back to video (the caller's,
 * when `createFaceRenderer` throws).
 */
import { FaceGeometry, invertAffine, WARP_FLOATS, WARP_INTS, type Affine, type ClientFace, type FaceFrame, type Opening } from './geometry.js';
import { COLUMN_ROWS } from './interior.js';
import { BACKGROUND_FS, OPENING_FS, RECT_VS, UPSCALE_FS, WARP_FS, WARP_VS } from './shaders.js';

export type { ClientFace, ClientMouth, ClientOpening, ClientPhotoMouth, FaceFrame } from './geometry.js';

export interface FaceRenderer {
  /** Draws one frame and shows it on the canvas. */
  draw(frame: FaceFrame): void;
  /** Switches to another face (allocates: between frames, not per frame). */
  setFace(face: ClientFace): void;
  /** The last frame drawn, RGB, top row first (width x height x 3 bytes). */
  readPixels(): Uint8Array;
  /** Frees the GL objects; the renderer is unusable after. */
  destroy(): void;
}

/** Throws when the canvas offers no WebGL2 context (the caller shows video instead). */
export function createFaceRenderer(canvas: HTMLCanvasElement | OffscreenCanvas, face: ClientFace): FaceRenderer {
  const gl = canvas.getContext('webgl2', CONTEXT_OPTIONS);
  if (!gl) throw new Error('WebGL2 is not available: the face cannot be drawn in this browser');
  return new GlFaceRenderer(canvas, gl, face);
}

const CONTEXT_OPTIONS: WebGLContextAttributes = { alpha: false, antialias: false, depth: false, stencil: false, premultipliedAlpha: false, preserveDrawingBuffer: false };

/** Vertex attribute locations (bound before linking). */
const ATTRIBUTES = ['aCorner', 'aFixed', 'aFixedRow', 'aBounds', 'aLong', 'aUpper', 'aLower'] as const;

/** Texture units: the photo, the mouth mask, an opening's columns, the frame read by a pass. */
const UNIT = { photo: 0, mask: 1, columns: 2, frame: 3 } as const;

/** A program and its uniforms by name. */
class Program {
  private readonly locations = new Map<string, WebGLUniformLocation | null>();

  constructor(
    private readonly gl: WebGL2RenderingContext,
    readonly program: WebGLProgram,
  ) {}

  static build(gl: WebGL2RenderingContext, vs: string, fs: string): Program {
    const program = gl.createProgram();
    for (const [type, source] of [
      [gl.VERTEX_SHADER, vs],
      [gl.FRAGMENT_SHADER, fs],
    ] as const) {
      const shader = gl.createShader(type);
      if (!shader) throw new Error('WebGL2: cannot create a shader');
      gl.shaderSource(shader, source);
      gl.compileShader(shader);
      if (!gl.getShaderParameter(shader, gl.COMPILE_STATUS)) throw new Error(`WebGL2: face shader does not compile: ${gl.getShaderInfoLog(shader)}`);
      gl.attachShader(program, shader);
      gl.deleteShader(shader);
    }
    ATTRIBUTES.forEach((name, i) => gl.bindAttribLocation(program, i, name));
    gl.linkProgram(program);
    if (!gl.getProgramParameter(program, gl.LINK_STATUS)) throw new Error(`WebGL2: face shaders do not link: ${gl.getProgramInfoLog(program)}`);
    return new Program(gl, program);
  }

  /** Makes the program current. */
  use(): this {
    this.gl.useProgram(this.program);
    return this;
  }

  at(name: string): WebGLUniformLocation | null {
    if (!this.locations.has(name)) this.locations.set(name, this.gl.getUniformLocation(this.program, name));
    return this.locations.get(name) ?? null;
  }
}

/** A colour render target: an RGBA8 texture and its framebuffer. */
interface Target {
  texture: WebGLTexture;
  fbo: WebGLFramebuffer;
  width: number;
  height: number;
}

/** What one face needs on the GPU. */
interface FaceResources {
  geometry: FaceGeometry;
  photo: WebGLTexture;
  mask: WebGLTexture;
  columns: WebGLTexture;
  /** Fitted photo, the frame being drawn, scratch for openings (canvas size); the output when upscaled. */
  background: Target;
  frame: Target;
  scratch: Target;
  output: Target | null;
}

class GlFaceRenderer implements FaceRenderer {
  private readonly background: Program;
  private readonly warp: Program;
  private readonly opening: Program;
  private readonly upscale: Program;
  private readonly corners: WebGLBuffer;
  private readonly warpInts: WebGLBuffer;
  private readonly warpFloats: WebGLBuffer;
  private readonly rectVao: WebGLVertexArrayObject;
  private readonly warpVao: WebGLVertexArrayObject;
  private res: FaceResources;

  constructor(
    private readonly canvas: HTMLCanvasElement | OffscreenCanvas,
    private readonly gl: WebGL2RenderingContext,
    face: ClientFace,
  ) {
    this.background = Program.build(gl, RECT_VS, BACKGROUND_FS);
    this.warp = Program.build(gl, WARP_VS, WARP_FS);
    this.opening = Program.build(gl, RECT_VS, OPENING_FS);
    this.upscale = Program.build(gl, RECT_VS, UPSCALE_FS);
    this.corners = buffer(gl, new Float32Array([0, 0, 1, 0, 0, 1, 1, 1]));
    this.warpInts = buffer(gl, null);
    this.warpFloats = buffer(gl, null);
    this.rectVao = this.cornerVao();
    this.warpVao = this.cornerVao();
    this.instanceAttributes();
    this.res = this.load(face);
  }

  draw(frame: FaceFrame): void {
    const gl = this.gl;
    const res = this.res;
    const g = res.geometry.frame(frame);
    copy(gl, res.background, res.frame, 0, 0, res.frame.width, res.frame.height);
    if (g.warp.count > 0) this.drawWarp(g.warp.count, g.warp.ints, g.warp.floats);
    for (const o of g.openings) this.drawOpening(o);
    const shown = res.output ?? res.frame;
    if (res.output) this.drawUpscale(res.output);
    gl.bindFramebuffer(gl.READ_FRAMEBUFFER, shown.fbo);
    gl.bindFramebuffer(gl.DRAW_FRAMEBUFFER, null);
    gl.blitFramebuffer(0, 0, shown.width, shown.height, 0, shown.height, shown.width, 0, gl.COLOR_BUFFER_BIT, gl.NEAREST);
  }

  setFace(face: ClientFace): void {
    const next = this.load(face);
    this.free(this.res);
    this.res = next;
  }

  readPixels(): Uint8Array {
    const gl = this.gl;
    const shown = this.res.output ?? this.res.frame;
    const rgba = new Uint8Array(shown.width * shown.height * 4);
    gl.bindFramebuffer(gl.READ_FRAMEBUFFER, shown.fbo);
    gl.readPixels(0, 0, shown.width, shown.height, gl.RGBA, gl.UNSIGNED_BYTE, rgba);
    const rgb = new Uint8Array(shown.width * shown.height * 3);
    for (let i = 0, j = 0; i < rgba.length; i += 4, j += 3) {
      rgb[j] = rgba[i] as number;
      rgb[j + 1] = rgba[i + 1] as number;
      rgb[j + 2] = rgba[i + 2] as number;
    }
    return rgb;
  }

  destroy(): void {
    const gl = this.gl;
    this.free(this.res);
    for (const p of [this.background, this.warp, this.opening, this.upscale]) gl.deleteProgram(p.program);
    for (const b of [this.corners, this.warpInts, this.warpFloats]) gl.deleteBuffer(b);
    gl.deleteVertexArray(this.rectVao);
    gl.deleteVertexArray(this.warpVao);
  }

  /** The face's textures and targets, its photo's uniforms set and its background drawn. */
  private load(face: ClientFace): FaceResources {
    const gl = this.gl;
    const geometry = new FaceGeometry(face);
    const pm = face.mouth.photo;
    const [cw, ch] = [face.canvasWidth, face.canvasHeight];
    const upscaled = cw !== face.width || ch !== face.height;
    const res: FaceResources = {
      geometry,
      photo: texture(gl, gl.RGB8UI, face.textureWidth, face.textureHeight, gl.RGB_INTEGER, gl.UNSIGNED_BYTE, face.texture),
      mask: pm ? texture(gl, gl.R8UI, pm.w, pm.h, gl.RED_INTEGER, gl.UNSIGNED_BYTE, pm.mask) : texture(gl, gl.R8UI, 1, 1, gl.RED_INTEGER, gl.UNSIGNED_BYTE, new Uint8Array(1)),
      columns: texture(gl, gl.RGBA32F, cw, COLUMN_ROWS, gl.RGBA, gl.FLOAT, null),
      background: target(gl, cw, ch),
      frame: target(gl, cw, ch),
      scratch: target(gl, cw, ch),
      output: upscaled ? target(gl, face.width, face.height) : null,
    };
    this.canvas.width = face.width;
    this.canvas.height = face.height;
    for (const p of [this.background, this.warp, this.opening]) {
      p.use();
      gl.uniform1i(p.at('uPhoto'), UNIT.photo);
      gl.uniform2i(p.at('uPhotoSize'), face.textureWidth, face.textureHeight);
      gl.uniform1f(p.at('uPhotoFactor'), face.textureFactor);
    }
    this.setMouth(face);
    gl.activeTexture(gl.TEXTURE0 + UNIT.photo);
    gl.bindTexture(gl.TEXTURE_2D, res.photo);
    gl.activeTexture(gl.TEXTURE0 + UNIT.mask);
    gl.bindTexture(gl.TEXTURE_2D, res.mask);
    gl.activeTexture(gl.TEXTURE0 + UNIT.columns);
    gl.bindTexture(gl.TEXTURE_2D, res.columns);
    this.drawBackground(res.background, invertAffine(Array.from(face.fit) as Affine) ?? [1, 0, 0, 1, 0, 0]);
    return res;
  }

  /** The opening program's per-face uniforms: samplers, mouth colours and photographed interior. */
  private setMouth(face: ClientFace): void {
    const gl = this.gl;
    const p = this.opening.use();
    gl.uniform1i(p.at('uMask'), UNIT.mask);
    gl.uniform1i(p.at('uColumns'), UNIT.columns);
    gl.uniform1i(p.at('uBase'), UNIT.frame);
    const m = face.mouth;
    for (const [name, c] of [
      ['uTeeth', m.teeth],
      ['uCavityEdge', m.cavityEdge],
      ['uCavityDeep', m.cavityDeep],
      ['uTongue', m.tongue],
      ['uSeam', m.seam],
    ] as const) {
      gl.uniform3f(p.at(name), c[0] as number, c[1] as number, c[2] as number);
    }
    gl.uniform1i(p.at('uHasPhotoMouth'), m.photo ? 1 : 0);
    if (m.photo) gl.uniform4i(p.at('uPhotoMouth'), m.photo.x0, m.photo.y0, m.photo.w, m.photo.h);
  }

  private free(res: FaceResources): void {
    const gl = this.gl;
    for (const t of [res.photo, res.mask, res.columns]) gl.deleteTexture(t);
    for (const t of [res.background, res.frame, res.scratch, res.output]) {
      if (!t) continue;
      gl.deleteFramebuffer(t.fbo);
      gl.deleteTexture(t.texture);
    }
  }

  private drawBackground(to: Target, inverseFit: Affine): void {
    const gl = this.gl;
    const p = this.background.use();
    setAffine(gl, p, inverseFit);
    this.drawRect(p, to, 0, 0, to.width, to.height);
  }

  private drawWarp(count: number, ints: Int32Array, floats: Float32Array): void {
    const gl = this.gl;
    const to = this.res.frame;
    const p = this.warp.use();
    gl.uniform2f(p.at('uTarget'), to.width, to.height);
    gl.uniform1i(p.at('uCanvasWidth'), to.width);
    gl.bindBuffer(gl.ARRAY_BUFFER, this.warpInts);
    gl.bufferData(gl.ARRAY_BUFFER, ints.subarray(0, count * WARP_INTS), gl.STREAM_DRAW);
    gl.bindBuffer(gl.ARRAY_BUFFER, this.warpFloats);
    gl.bufferData(gl.ARRAY_BUFFER, floats.subarray(0, count * WARP_FLOATS), gl.STREAM_DRAW);
    gl.bindFramebuffer(gl.FRAMEBUFFER, to.fbo);
    gl.viewport(0, 0, to.width, to.height);
    gl.bindVertexArray(this.warpVao);
    gl.drawArraysInstanced(gl.TRIANGLE_STRIP, 0, 4, count);
  }

  /** One opening: drawn into the scratch target from the frame, then copied back into the frame. */
  private drawOpening(o: Opening): void {
    const gl = this.gl;
    const { frame, scratch, columns } = this.res;
    gl.activeTexture(gl.TEXTURE0 + UNIT.columns);
    gl.bindTexture(gl.TEXTURE_2D, columns);
    gl.texSubImage2D(gl.TEXTURE_2D, 0, 0, 0, frame.width, COLUMN_ROWS, gl.RGBA, gl.FLOAT, o.columns);
    gl.activeTexture(gl.TEXTURE0 + UNIT.frame);
    gl.bindTexture(gl.TEXTURE_2D, frame.texture);
    const p = this.opening.use();
    gl.uniform1i(p.at('uX0'), o.x0);
    gl.uniform1f(p.at('uFeather'), o.feather);
    setAffine(gl, p, o.inverse);
    gl.uniform1i(p.at('uMouth'), o.look ? 1 : 0);
    if (o.look) {
      const k = o.look;
      gl.uniform4f(p.at('uLook'), k.xLeft, k.xRight, k.mouthWidth, k.open);
      gl.uniform4f(p.at('uLook2'), k.wide, k.tongue, k.jaw, k.upperTeeth ? 1 : 0);
    }
    this.drawRect(p, scratch, o.x0, o.y0, o.x1, o.y1);
    copy(gl, scratch, frame, o.x0, o.y0, o.x1, o.y1);
  }

  private drawUpscale(to: Target): void {
    const gl = this.gl;
    const from = this.res.frame;
    gl.activeTexture(gl.TEXTURE0 + UNIT.frame);
    gl.bindTexture(gl.TEXTURE_2D, from.texture);
    const p = this.upscale.use();
    gl.uniform1i(p.at('uCanvas'), UNIT.frame);
    gl.uniform2i(p.at('uCanvasSize'), from.width, from.height);
    gl.uniform2i(p.at('uOutSize'), to.width, to.height);
    this.drawRect(p, to, 0, 0, to.width, to.height);
  }

  /** Runs the current program `p` over pixels [x0, x1) x [y0, y1) of `to`. */
  private drawRect(p: Program, to: Target, x0: number, y0: number, x1: number, y1: number): void {
    const gl = this.gl;
    gl.uniform4f(p.at('uRect'), x0, y0, x1, y1);
    gl.uniform2f(p.at('uTarget'), to.width, to.height);
    gl.bindFramebuffer(gl.FRAMEBUFFER, to.fbo);
    gl.viewport(0, 0, to.width, to.height);
    gl.bindVertexArray(this.rectVao);
    gl.drawArrays(gl.TRIANGLE_STRIP, 0, 4);
  }

  /** A vertex array with the unit square's corners (a triangle strip) at `aCorner`. */
  private cornerVao(): WebGLVertexArrayObject {
    const gl = this.gl;
    const vao = gl.createVertexArray();
    gl.bindVertexArray(vao);
    gl.bindBuffer(gl.ARRAY_BUFFER, this.corners);
    gl.enableVertexAttribArray(0);
    gl.vertexAttribPointer(0, 2, gl.FLOAT, false, 0, 0);
    return vao;
  }

  /** The warp's per-triangle attributes (`geometry.ts`'s `Warp` layout), one per instance. */
  private instanceAttributes(): void {
    const gl = this.gl;
    gl.bindVertexArray(this.warpVao);
    const stride = 4 * 4 * 3;
    for (let k = 0; k < 3; k++) {
      gl.bindBuffer(gl.ARRAY_BUFFER, this.warpInts);
      gl.enableVertexAttribArray(1 + k);
      gl.vertexAttribIPointer(1 + k, 4, gl.INT, stride, 16 * k);
      gl.vertexAttribDivisor(1 + k, 1);
      gl.bindBuffer(gl.ARRAY_BUFFER, this.warpFloats);
      gl.enableVertexAttribArray(4 + k);
      gl.vertexAttribPointer(4 + k, 4, gl.FLOAT, false, stride, 16 * k);
      gl.vertexAttribDivisor(4 + k, 1);
    }
    gl.bindVertexArray(null);
  }
}

/** An affine map into the program's `uInvM` (matrix) and `uInvT` (translation). */
function setAffine(gl: WebGL2RenderingContext, p: Program, a: Affine): void {
  gl.uniform4f(p.at('uInvM'), a[0], a[1], a[2], a[3]);
  gl.uniform2f(p.at('uInvT'), a[4], a[5]);
}

function buffer(gl: WebGL2RenderingContext, data: Float32Array | null): WebGLBuffer {
  const b = gl.createBuffer();
  gl.bindBuffer(gl.ARRAY_BUFFER, b);
  if (data) gl.bufferData(gl.ARRAY_BUFFER, data, gl.STATIC_DRAW);
  return b;
}

/** A texture read with `texelFetch` only (nearest, no mipmaps). */
function texture(gl: WebGL2RenderingContext, internal: number, width: number, height: number, format: number, type: number, data: ArrayBufferView | null): WebGLTexture {
  const t = gl.createTexture();
  gl.bindTexture(gl.TEXTURE_2D, t);
  gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.NEAREST);
  gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MAG_FILTER, gl.NEAREST);
  gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_WRAP_S, gl.CLAMP_TO_EDGE);
  gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_WRAP_T, gl.CLAMP_TO_EDGE);
  gl.pixelStorei(gl.UNPACK_ALIGNMENT, 1);
  gl.texImage2D(gl.TEXTURE_2D, 0, internal, width, height, 0, format, type, data);
  return t;
}

function target(gl: WebGL2RenderingContext, width: number, height: number): Target {
  const tex = texture(gl, gl.RGBA8, width, height, gl.RGBA, gl.UNSIGNED_BYTE, null);
  const fbo = gl.createFramebuffer();
  gl.bindFramebuffer(gl.FRAMEBUFFER, fbo);
  gl.framebufferTexture2D(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0, gl.TEXTURE_2D, tex, 0);
  if (gl.checkFramebufferStatus(gl.FRAMEBUFFER) !== gl.FRAMEBUFFER_COMPLETE) throw new Error('WebGL2: cannot render to an RGBA8 texture');
  return { texture: tex, fbo, width, height };
}

/** Copies pixels [x0, x1) x [y0, y1) from one target to the same place in another. */
function copy(gl: WebGL2RenderingContext, from: Target, to: Target, x0: number, y0: number, x1: number, y1: number): void {
  gl.bindFramebuffer(gl.READ_FRAMEBUFFER, from.fbo);
  gl.bindFramebuffer(gl.DRAW_FRAMEBUFFER, to.fbo);
  gl.blitFramebuffer(x0, y0, x1, y1, x0, y0, x1, y1, gl.COLOR_BUFFER_BIT, gl.NEAREST);
}
