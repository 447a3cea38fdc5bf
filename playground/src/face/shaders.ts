/**
 * GLSL ES 3.00 sources of the face renderer's passes, each the per-pixel half of a native
 * function: the fitted background (`Renderer::set_rig`), the triangle warp (`raster.rs`), the
 * eye and mouth openings (`interior::composite` and its colour functions, `mouth_interior`,
 * `teeth_rows`, `photo_slit`, `mask_at`), and the bilinear upscale (`upscale.rs`).
 *
 * Invariants: pixel values are integers end to end (render targets are RGBA8 and hold exactly
 * n / 255; the photo and the mouth mask are integer textures), and the sampler, blends and
 * upscale use the native 8-bit weights and rounding, so a pass writes the bytes its native
 * function writes. Render targets are stored top row first: target row y is canvas row y, and
 * `gl_FragCoord` is the canvas pixel centre.
 *
 * Not here: the geometry each pass gets (`geometry.ts`, `interior.ts`), and GL objects
 * (`renderer.ts`).
 */
import { PAD } from './geometry.js';
import { NONE } from './interior.js';

const HEADER = `#version 300 es
precision highp float;
precision highp int;
precision highp usampler2D;
precision highp sampler2D;
`;

/** A rectangle of target pixels (`uRect`: x0, y0, x1, y1) from a unit-square corner attribute. */
export const RECT_VS = `${HEADER}
in vec2 aCorner;
uniform vec4 uRect;
uniform vec2 uTarget;
void main() {
  gl_Position = vec4(mix(uRect.xy, uRect.zw, aCorner) / uTarget * 2.0 - 1.0, 0.0, 1.0);
}
`;

/**
 * The photo as \`sampler.rs\` reads it: fixed-point positions in padded texels (16 fraction bits),
 * clamped like \`sample_clamped\` (the replicated border is an edge clamp), 8-bit bilinear weights.
 */
const SAMPLER = `
uniform usampler2D uPhoto;
uniform ivec2 uPhotoSize;
uniform float uPhotoFactor;

ivec3 tap(int x, int y) {
  ivec2 p = clamp(ivec2(x, y) - ${PAD}, ivec2(0), uPhotoSize - 1);
  return ivec3(texelFetch(uPhoto, p, 0).rgb);
}

ivec3 sampleFixed(int u, int v) {
  u = clamp(u, 0, (uPhotoSize.x + ${2 * PAD - 2}) << 16);
  v = clamp(v, 0, (uPhotoSize.y + ${2 * PAD - 2}) << 16);
  int x = u >> 16, y = v >> 16;
  int fx = (u >> 8) & 255, fy = (v >> 8) & 255;
  int w11 = (fx * fy) >> 8;
  int w01 = fx - w11, w10 = fy - w11, w00 = 256 + w11 - fx - fy;
  ivec3 c = tap(x, y) * w00 + tap(x + 1, y) * w01 + tap(x, y + 1) * w10 + tap(x + 1, y + 1) * w11;
  return (c + 128) >> 8;
}

/** Photo pixel position (centres at +0.5) → the sample there (\`to_sample\`, then rounded to fixed point). */
ivec3 samplePhoto(vec2 p) {
  vec2 q = p / uPhotoFactor - 0.5 + ${PAD}.0;
  vec2 w = floor(q);
  ivec2 f = ivec2(w) * 65536 + ivec2(floor((q - w) * 65536.0 + 0.5));
  return sampleFixed(f.x, f.y);
}

vec4 bytes(ivec3 c) { return vec4(vec3(c) / 255.0, 1.0); }
`;

/** Every canvas pixel centre mapped back through the inverse fit (`uInvM`, `uInvT`) into the photo. */
export const BACKGROUND_FS = `${HEADER}${SAMPLER}
uniform vec4 uInvM;
uniform vec2 uInvT;
out vec4 outColor;
void main() {
  vec2 c = gl_FragCoord.xy;
  outColor = bytes(samplePhoto(vec2(uInvM.x * c.x + uInvM.y * c.y + uInvT.x, uInvM.z * c.x + uInvM.w * c.y + uInvT.y)));
}
`;

/**
 * One warp triangle per instance, drawn as its bounding box; the attributes are
 * `geometry.ts`'s `Warp` (fixed-point sampling, rows, box, edges).
 */
export const WARP_VS = `${HEADER}
in vec2 aCorner;
in ivec4 aFixed;
in ivec4 aFixedRow;
in ivec4 aBounds;
in vec4 aLong;
in vec4 aUpper;
in vec4 aLower;
uniform vec2 uTarget;
flat out ivec4 vFixed;
flat out ivec4 vFixedRow;
flat out ivec4 vBounds;
flat out vec4 vLong;
flat out vec4 vUpper;
flat out vec4 vLower;
void main() {
  vFixed = aFixed; vFixedRow = aFixedRow; vBounds = aBounds;
  vLong = aLong; vUpper = aUpper; vLower = aLower;
  vec2 lo = vec2(float(aBounds.y), float(aFixedRow.w)), hi = vec2(float(aBounds.z), float(aBounds.x));
  gl_Position = vec4(mix(lo, hi, aCorner) / uTarget * 2.0 - 1.0, 0.0, 1.0);
}
`;

/** `draw_triangle`'s coverage rule (a row's span from the edges' crossings) and fixed-point steps. */
export const WARP_FS = `${HEADER}${SAMPLER}
uniform int uCanvasWidth;
flat in ivec4 vFixed;
flat in ivec4 vFixedRow;
flat in ivec4 vBounds;
flat in vec4 vLong;
flat in vec4 vUpper;
flat in vec4 vLower;
out vec4 outColor;
void main() {
  int x = int(gl_FragCoord.x), y = int(gl_FragCoord.y);
  if (y < vFixedRow.w || y >= vBounds.x) discard;
  float yc = float(y) + 0.5;
  float xa = vLong.x + (yc - vLong.y) * vLong.z;
  float xb = yc < vLong.w ? vUpper.x + (yc - vUpper.y) * vUpper.z : vLower.x + (yc - vLower.y) * vLower.z;
  float xl = xa <= xb ? xa : xb, xr = xa <= xb ? xb : xa;
  if (x < max(int(ceil(xl - 0.5)), 0) || x >= min(int(ceil(xr - 0.5)), uCanvasWidth)) discard;
  int dx = x - vFixedRow.z, dy = y - vFixedRow.w;
  outColor = bytes(sampleFixed(vFixed.x + dx * vFixed.z + dy * vFixedRow.x, vFixed.y + dx * vFixed.w + dy * vFixedRow.y));
}
`;

/** `interior.rs`: coverage of the opening, and the colours of eyes and mouths. */
const INTERIOR = `
struct Pixel { float x; float y; float top; float bot; float shift; float restBot; float gap; };

float rampArea(float z, float f) { return z <= f ? z * z / (2.0 * f) : z - 0.5 * f; }

float coverage(float a, float b, float yt, float yb, float feather) {
  if (!(b > a)) return 0.0;
  float h = min(0.5 * feather, 0.5 * (b - a));
  if (h < 1e-3) return max(min(b, yb) - max(a, yt), 0.0);
  a -= h; b += h;
  float f = 2.0 * h, lo = max(a, yt), hi = min(b, yb);
  if (hi <= lo) return 0.0;
  return rampArea(hi - a, f) - rampArea(lo - a, f) + rampArea(b - lo, f) - rampArea(b - hi, f) - (hi - lo);
}

float sstep(float e0, float e1, float x) {
  float t = clamp((x - e0) / (e1 - e0), 0.0, 1.0);
  return t * t * (3.0 - 2.0 * t);
}

vec3 mix3(vec3 a, vec3 b, float t) { return a + (b - a) * t; }

/** Canvas pixel → photo pixel through the opening's inverse layer. */
uniform vec4 uInvM;
uniform vec2 uInvT;
vec2 unlayer(vec2 p) { return vec2(uInvM.x * p.x + uInvM.y * p.y + uInvT.x, uInvM.z * p.x + uInvM.w * p.y + uInvT.y); }

/** xLeft, xRight, mouthWidth, open; wide, tongue, jaw, upper teeth (1 or 0). */
uniform vec4 uLook;
uniform vec4 uLook2;
uniform vec3 uTeeth;
uniform vec3 uCavityEdge;
uniform vec3 uCavityDeep;
uniform vec3 uTongue;
uniform vec3 uSeam;
uniform bool uHasPhotoMouth;
uniform ivec4 uPhotoMouth;
uniform usampler2D uMask;

const float TOOTH_LINES[5] = float[5](-0.62, -0.34, 0.0, 0.34, 0.62);
const float LOWER_TOOTH_LINES[7] = float[7](-0.66, -0.44, -0.22, 0.0, 0.22, 0.44, 0.66);

float toothGap(float t, float half_, float line, float depth, float widthPx) {
  return 1.0 - depth * (1.0 - sstep(0.0, widthPx, abs(t - line) * half_));
}

/** \`teeth_rows\`: the upper row's edge and the lower row's tips. */
vec2 teethRows(Pixel p, float t) {
  float w = uLook.z;
  float upperEdge = uLook2.w > 0.5
    ? p.top + clamp(0.03 * w - p.shift, 0.0, 0.09 * w) * sqrt(max(1.0 - t * t, 0.0))
    : p.restBot + p.shift;
  return vec2(upperEdge, max(p.restBot + uLook2.z - 0.03 * w, upperEdge + 1.0));
}

/** \`mouth_interior\`: cavity, tongue, lower and upper teeth, the lips' shadow. */
vec3 mouthInterior(Pixel p) {
  float xl = uLook.x, xr = uLook.y, w = uLook.z, open = uLook.w;
  float wide = uLook2.x, tongue = uLook2.y;
  float half_ = max((xr - xl) * 0.5, 0.5);
  float t = clamp((p.x - (xl + xr) * 0.5) / half_, -1.0, 1.0);
  float gap = max(p.bot - p.top, 0.25);
  float vy = p.y - p.top;
  float dy = p.bot - p.y;
  float round_ = max(-wide, 0.0);
  vec2 rows = teethRows(p, t);
  float upperEdge = rows.x, tips = rows.y;
  float depthV = ((vy / gap) - 0.4) / 0.6;
  vec3 col = mix3(uCavityDeep, uCavityEdge, sstep(0.3, 1.2, t * t + depthV * depthV));
  float light = 0.25 + 0.75 * sstep(0.0, 0.14 * w, gap);
  float room = max(tips - upperEdge, 0.0);
  float reach = (0.25 + (0.9 - 0.25) * tongue) * room * sstep(0.05, 0.3, open);
  float hw = 0.8 - 0.35 * tongue;
  float dome = max(1.0 - (t / hw) * (t / hw), 0.0);
  float tongueTop = tips - reach * dome;
  if (reach * dome > 0.05 && p.y > tongueTop - 1.0) {
    float under = p.y - tongueTop;
    float a = sstep(-1.0, 1.0, under) * sstep(0.0, 0.3, dome);
    float shade = (0.66 + 0.27 * tongue) * (1.0 - 0.3 * t * t) * (0.75 + 0.25 * sstep(0.0, 0.4 * max(reach, 2.0), under))
      * toothGap(t, half_, 0.0, 0.15, 0.04 * w);
    col = mix3(col, uTongue * shade, a);
  }
  float vis = sstep(0.06, 0.35, open) * (1.0 - 0.95 * round_);
  if (vis > 0.0 && p.y > tips - 0.5) {
    float arch = abs(p.x - (xl + xr) * 0.5) / max(0.5 * w, 0.5);
    float a = clamp(p.y - tips + 0.5, 0.0, 1.0) * vis * sstep(0.52, 0.3, arch) * sstep(0.5, 2.5, p.bot - tips);
    float gaps = 1.0;
    for (int k = 0; k < 7; k++) gaps *= toothGap(t, half_, LOWER_TOOTH_LINES[k], 0.06, 0.7);
    float shade = (1.0 - 0.35 * t * t) * gaps;
    vec3 tooth = p.y - tips < 0.1 * w ? uTeeth * shade : uTongue * 0.9;
    col = mix3(col, tooth, a);
  }
  if (uLook2.w > 0.5) {
    float upperH = upperEdge - p.top;
    if (upperH > 0.05 && vy < upperH + 0.5) {
      float a = clamp(upperH - vy + 0.5, 0.0, 1.0) * sstep(0.97, 0.75, abs(t));
      float gaps = 1.0;
      for (int k = 0; k < 5; k++) gaps *= toothGap(t, half_, TOOTH_LINES[k], 0.16, 0.9);
      float shade = (1.0 - 0.45 * t * t) * (0.7 + 0.3 * sstep(0.0, 0.5 * max(upperH, 1.0), vy)) * gaps;
      col = mix3(col, uTeeth * shade, a);
    }
  }
  float s = max(0.12 * gap, 1.0);
  float occ = (0.75 + 0.25 * sstep(-0.5, s, vy)) * (0.88 + 0.12 * sstep(-0.5, s, dy));
  return col * (light * occ);
}

/** \`mask_at\`: the photographed mouth's coverage at photo position q, 0..1. */
float maskTap(int i, int j) {
  if (i < 0 || j < 0 || i >= uPhotoMouth.z || j >= uPhotoMouth.w) return 0.0;
  return float(texelFetch(uMask, ivec2(i, j), 0).r) / 255.0;
}
float maskAt(vec2 q) {
  vec2 p = q - vec2(uPhotoMouth.xy) - 0.5;
  vec2 w = floor(p), f = p - w;
  int i = int(w.x), j = int(w.y);
  float top = maskTap(i, j) + (maskTap(i + 1, j) - maskTap(i, j)) * f.x;
  float bot = maskTap(i, j + 1) + (maskTap(i + 1, j + 1) - maskTap(i, j + 1)) * f.x;
  return top + (bot - top) * f.y;
}

/** The mouth's colour: synthesised, under the photographed interior where the photo has one. */
vec3 mouthColour(Pixel p) {
  vec3 synth = mouthInterior(p);
  if (!uHasPhotoMouth) return synth;
  vec2 q = unlayer(vec2(p.x, p.y - p.shift));
  float open = sstep(0.0, 0.05 * max(uLook.z, 1.0), p.gap);
  synth = mix3(uSeam, synth, open);
  float alpha = maskAt(q) * open;
  if (alpha <= 0.0) return synth;
  return synth + (vec3(samplePhoto(q)) - synth) * alpha;
}
`;

/**
 * One opening over its rectangle: the frame so far (`uBase`) with the opening's colour blended
 * in by its coverage, from the columns `geometry.ts` computed (`uColumns`, from column `uX0`).
 */
export const OPENING_FS = `${HEADER}${SAMPLER}${INTERIOR}
uniform sampler2D uBase;
uniform sampler2D uColumns;
uniform int uX0;
uniform float uFeather;
uniform bool uMouth;
out vec4 outColor;
void main() {
  ivec2 px = ivec2(gl_FragCoord.xy);
  vec4 base = texelFetch(uBase, px, 0);
  int i = px.x - uX0;
  vec4 s01 = texelFetch(uColumns, ivec2(i, 0), 0);
  vec4 s23 = texelFetch(uColumns, ivec2(i, 1), 0);
  vec4 c = texelFetch(uColumns, ivec2(i, 2), 0);
  float yt = float(px.y), yb = yt + 1.0;
  float cov = 0.0;
  cov += coverage(s01.x, s01.y, yt, yb, uFeather);
  cov += coverage(s01.z, s01.w, yt, yb, uFeather);
  cov += coverage(s23.x, s23.y, yt, yb, uFeather);
  cov += coverage(s23.z, s23.w, yt, yb, uFeather);
  cov *= 0.25;
  if (cov <= 1.0 / 512.0) { outColor = base; return; }
  float top = c.x, bot = c.y, gap = texelFetch(uColumns, ivec2(i, 3), 0).x;
  if (!(top < bot)) { top = yt; bot = yb; gap = 0.0; }
  Pixel p = Pixel(float(px.x) + 0.5, yt + 0.5, top, bot, c.z, c.w > ${-NONE / 2} ? c.w : bot, gap);
  vec3 colour = uMouth ? mouthColour(p) : vec3(samplePhoto(unlayer(vec2(p.x, p.y))));
  int a = int(floor(min(cov, 1.0) * 256.0 + 0.5));
  ivec3 src = ivec3(floor(clamp(colour, 0.0, 255.0) + 0.5));
  ivec3 dst = ivec3(floor(base.rgb * 255.0 + 0.5));
  outColor = bytes((src * a + dst * (256 - a) + 128) >> 8);
}
`;

/** `upscale.rs`: the canvas (`uCanvas`) upscaled to the output, vertical blend first, 8-bit weights. */
export const UPSCALE_FS = `${HEADER}
uniform sampler2D uCanvas;
uniform ivec2 uCanvasSize;
uniform ivec2 uOutSize;
out vec4 outColor;

/** \`upscale_table\` exactly, in integers: s = ((2o + 1) canvas - out) / (2 out), clamped. */
ivec2 table(int o, int canvas, int out_) {
  int num = (2 * o + 1) * canvas - out_, den = 2 * out_;
  if (num <= 0) return ivec2(0, 0);
  int i = num / den;
  if (i >= canvas - 1) return ivec2(canvas - 1, 0);
  return ivec2(i, min((256 * (num - i * den) + out_) / den, 255));
}
ivec3 texel(int x, int y) { return ivec3(floor(texelFetch(uCanvas, ivec2(x, y), 0).rgb * 255.0 + 0.5)); }
ivec3 lerp2(ivec3 a, ivec3 b, int f) { return (a * (256 - f) + b * f + 128) >> 8; }

void main() {
  ivec2 o = ivec2(gl_FragCoord.xy);
  ivec2 tx = table(o.x, uCanvasSize.x, uOutSize.x), ty = table(o.y, uCanvasSize.y, uOutSize.y);
  int x1 = min(tx.x + 1, uCanvasSize.x - 1), y1 = min(ty.x + 1, uCanvasSize.y - 1);
  ivec3 left = lerp2(texel(tx.x, ty.x), texel(tx.x, y1), ty.y);
  ivec3 right = lerp2(texel(x1, ty.x), texel(x1, y1), ty.y);
  outColor = vec4(vec3(lerp2(left, right, tx.y)) / 255.0, 1.0);
}
`;
