/* image.c — PNG and JPEG images, decoded with libpng and libjpeg-turbo.
 *
 * A file is read whole into memory, then decoded by the library its first
 * bytes name (the PNG signature, or a JPEG's SOI marker 0xFF 0xD8 0xFF):
 * the extension is not trusted.  The pixels become floats in [0, 1], as
 * torchvision's ToTensor makes them: an 8-bit sample v is v / 255, a 16-bit
 * PNG's v / 65535 (its precision kept, where PIL would cut it to 8 bits).
 *
 * The channels are the caller's choice, as torchvision's ImageFolder
 * converts every image with PIL's convert("RGB") (and Grayscale() with
 * convert("L")): 3 gives RGB, grayscale repeated; 1 gives ITU-R 601-2 luma,
 * computed as PIL does on 8-bit values (L = (19595 R + 38470 G + 7471 B +
 * 32768) >> 16), so that results agree exactly; 0 keeps the file's own
 * (1 or 3).  Alpha is dropped, not composited, as convert("RGB") does; a
 * palette is expanded; gamma and colour profiles are ignored, as PIL
 * ignores them.  A CMYK JPEG becomes RGB as PIL converts it,
 * R = (255 - C)(255 - K) / 255, with Adobe's inverted CMYK undone first.
 *
 * Both libraries report errors through callbacks: here they record the
 * message and longjmp back to the decoding function, which frees what it
 * holds and returns DLRT_E_FORMAT naming the file.  libjpeg reports a
 * truncated file as a warning and fills the rest grey; that warning, and
 * those of corrupt entropy-coded data, are errors here, as PIL raises
 * "image file is truncated".  No library prints anything.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

#include "dlrt.h"

/* A side of at most 2^16 pixels (JPEG's limit), 2^28 pixels in all. */
#define IMAGE_MAX_PIXELS (INT64_C(1) << 28)
/* Files of at most 1 GiB. */
#define IMAGE_MAX_BYTES (INT64_C(1) << 30)

/* ---- reading files ------------------------------------------------------ */

DlrtStatus dlrt_read_file(const char *path, unsigned char **data, size_t *size, DlrtError *err) {
    *data = NULL;
    *size = 0;
    errno = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return dlrt_fail(err, DLRT_E_IO, "%s: cannot open: %s", path,
                         strerror(errno ? errno : ENOENT));
    unsigned char *buf = NULL;
    size_t have = 0, cap = 0;
    DlrtStatus st = DLRT_OK;
    for (;;) {
        if (have == cap) {
            if ((int64_t)cap >= IMAGE_MAX_BYTES) {
                st = dlrt_fail(err, DLRT_E_RANGE, "%s: larger than %lld bytes", path,
                               (long long)IMAGE_MAX_BYTES);
                break;
            }
            size_t ncap = cap ? cap * 2 : 1 << 16;
            unsigned char *nb = realloc(buf, ncap);
            if (!nb) {
                st = dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory reading the file", path);
                break;
            }
            buf = nb;
            cap = ncap;
        }
        size_t n = fread(buf + have, 1, cap - have, f);
        have += n;
        if (n == 0) {
            if (ferror(f))
                st = dlrt_fail(err, DLRT_E_IO, "%s: cannot read: %s", path,
                               strerror(errno ? errno : EIO));
            break;
        }
    }
    fclose(f);
    if (st != DLRT_OK) {
        free(buf);
        return st;
    }
    *data = buf;
    *size = have;
    return DLRT_OK;
}

/* ---- the image ---------------------------------------------------------- */

DlrtStatus dlrt_image_alloc(DlrtImage *img, int64_t channels, int64_t height, int64_t width,
                            DlrtError *err) {
    *img = (DlrtImage){0};
    if (channels < 1 || height < 1 || width < 1 || height > IMAGE_MAX_PIXELS ||
        width > IMAGE_MAX_PIXELS || height * width > IMAGE_MAX_PIXELS)
        return dlrt_fail(err, DLRT_E_RANGE, "an image of %lldx%lld pixels is outside 1 to "
                         "%lld pixels", (long long)width, (long long)height,
                         (long long)IMAGE_MAX_PIXELS);
    img->data = malloc(sizeof(float) * (size_t)(channels * height * width));
    if (!img->data)
        return dlrt_fail(err, DLRT_E_NOMEM, "out of memory for an image of %lldx%lld",
                         (long long)width, (long long)height);
    img->channels = channels;
    img->height = height;
    img->width = width;
    return DLRT_OK;
}

void dlrt_image_free(DlrtImage *img) {
    free(img->data);
    *img = (DlrtImage){0};
}

/* Interleaved samples (src_channels of 1 to 4: gray, gray+alpha, RGB,
 * RGBA; 8 or 16 bits, big-endian as PNG stores them) of one row into
 * img's planes at row y, converted to img->channels. */
static void put_row(DlrtImage *img, int64_t y, const unsigned char *row, int src_channels,
                    int bits) {
    int64_t w = img->width, plane = img->height * w;
    float *out = img->data + y * w;
    bool color = src_channels >= 3;
    for (int64_t x = 0; x < w; x++) {
        unsigned v[3];
        for (int c = 0; c < (color ? 3 : 1); c++) {
            const unsigned char *s = row + (x * src_channels + c) * (bits / 8);
            v[c] = bits == 16 ? (unsigned)s[0] << 8 | s[1] : s[0];
        }
        if (!color)
            v[1] = v[2] = v[0];
        if (img->channels == 3) {
            /* a division, as ToTensor's div(255), to the same bits */
            float max = bits == 16 ? 65535.0f : 255.0f;
            for (int c = 0; c < 3; c++)
                out[c * plane + x] = (float)v[c] / max;
        } else if (!color) {
            out[x] = (float)v[0] / (bits == 16 ? 65535.0f : 255.0f);
        } else if (bits == 8) {
            unsigned l = (v[0] * 19595 + v[1] * 38470 + v[2] * 7471 + 0x8000) >> 16;
            out[x] = (float)l / 255.0f;
        } else {
            out[x] = (float)(0.299 * v[0] + 0.587 * v[1] + 0.114 * v[2]) / 65535.0f;
        }
    }
}

/* ---- PNG ---------------------------------------------------------------- */

/* What the libpng callbacks share with the decoder. */
typedef struct PngSource {
    const unsigned char *data;
    size_t size, pos;
    char message[200];  /* libpng's error */
    jmp_buf jump;
} PngSource;

static void png_on_error(png_structp png, png_const_charp msg) {
    PngSource *s = png_get_error_ptr(png);
    snprintf(s->message, sizeof s->message, "%s", msg);
    longjmp(s->jump, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg;
}

static void png_on_read(png_structp png, png_bytep out, png_size_t n) {
    PngSource *s = png_get_io_ptr(png);
    if (n > s->size - s->pos)
        png_error(png, "the file is truncated");
    memcpy(out, s->data + s->pos, n);
    s->pos += n;
}

/* What the PNG decoder holds, outside its setjmp frame. */
typedef struct PngState {
    png_structp png;
    png_infop info;
    unsigned char *pixels;  /* the decoded rows */
    png_bytep *rows;
} PngState;

static DlrtStatus png_decode(PngState *ps, PngSource *src, DlrtImage *img, const char *name,
                             int channels, DlrtError *err) {
    if (setjmp(src->jump))
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: bad PNG: %s", name, src->message);
    png_set_read_fn(ps->png, src, png_on_read);
    png_set_user_limits(ps->png, 1u << 16, 1u << 16);
    png_read_info(ps->png, ps->info);
    png_uint_32 w = png_get_image_width(ps->png, ps->info);
    png_uint_32 h = png_get_image_height(ps->png, ps->info);
    /* palettes and low bit depths to 8 bits, transparency to alpha, then
       no alpha: what remains is gray or RGB of 8 or 16 bits */
    png_set_expand(ps->png);
    png_set_strip_alpha(ps->png);
    png_set_interlace_handling(ps->png);
    png_read_update_info(ps->png, ps->info);
    int bits = png_get_bit_depth(ps->png, ps->info);
    int src_channels = png_get_channels(ps->png, ps->info);
    if ((bits != 8 && bits != 16) || (src_channels != 1 && src_channels != 3))
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: a PNG of %d channels of %d bits, after "
                         "expansion (expected 1 or 3 of 8 or 16)", name, src_channels, bits);
    size_t stride = png_get_rowbytes(ps->png, ps->info);
    if ((int64_t)w * h > IMAGE_MAX_PIXELS)
        return dlrt_fail(err, DLRT_E_RANGE, "%s: %ux%u pixels, more than %lld", name,
                         (unsigned)w, (unsigned)h, (long long)IMAGE_MAX_PIXELS);
    ps->pixels = malloc(stride * h);
    ps->rows = malloc(sizeof *ps->rows * h);
    if (!ps->pixels || !ps->rows)
        return dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory for %ux%u pixels", name,
                         (unsigned)w, (unsigned)h);
    for (png_uint_32 y = 0; y < h; y++)
        ps->rows[y] = ps->pixels + y * stride;
    png_read_image(ps->png, ps->rows);
    png_read_end(ps->png, NULL);
    if (dlrt_image_alloc(img, channels ? channels : src_channels, h, w, NULL) != DLRT_OK)
        return dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory for %ux%u pixels", name,
                         (unsigned)w, (unsigned)h);
    for (png_uint_32 y = 0; y < h; y++)
        put_row(img, y, ps->rows[y], src_channels, bits);
    return DLRT_OK;
}

static DlrtStatus decode_png(DlrtImage *img, const unsigned char *data, size_t size,
                             const char *name, int channels, DlrtError *err) {
    PngSource src = {.data = data, .size = size};
    PngState ps = {0};
    ps.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning);
    ps.info = ps.png ? png_create_info_struct(ps.png) : NULL;
    DlrtStatus st = ps.info ? png_decode(&ps, &src, img, name, channels, err)
                            : dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory for libpng", name);
    png_destroy_read_struct(ps.png ? &ps.png : NULL, ps.info ? &ps.info : NULL, NULL);
    free(ps.pixels);
    free(ps.rows);
    if (st != DLRT_OK)
        dlrt_image_free(img);
    return st;
}

/* ---- JPEG --------------------------------------------------------------- */

/* libjpeg's error manager, with the way back and the message. */
typedef struct JpegErrors {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
} JpegErrors;

static void jpeg_on_error(j_common_ptr cinfo) {
    JpegErrors *e = (JpegErrors *)cinfo->err;
    cinfo->err->format_message(cinfo, e->message);
    longjmp(e->jump, 1);
}

/* Warnings that mean the pixels are wrong (the file ends early, the
 * entropy-coded data is corrupt) stop the decoding; others are ignored. */
static void jpeg_on_message(j_common_ptr cinfo, int level) {
    int code = cinfo->err->msg_code;
    if (level < 0 && (code == JWRN_JPEG_EOF || code == JWRN_HUFF_BAD_CODE ||
                      code == JWRN_MUST_RESYNC || code == JWRN_NOT_SEQUENTIAL ||
                      code == JWRN_BOGUS_PROGRESSION))
        jpeg_on_error(cinfo);
}

static void jpeg_on_output(j_common_ptr cinfo) { (void)cinfo; }

typedef struct JpegState {
    struct jpeg_decompress_struct cinfo;
    JpegErrors errors;
    unsigned char *row;
} JpegState;

static DlrtStatus jpeg_decode(JpegState *js, const unsigned char *data, size_t size,
                              DlrtImage *img, const char *name, int channels, DlrtError *err) {
    struct jpeg_decompress_struct *ci = &js->cinfo;
    if (setjmp(js->errors.jump))
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: bad JPEG: %s", name, js->errors.message);
    jpeg_create_decompress(ci);
    jpeg_mem_src(ci, data, (unsigned long)size);
    jpeg_save_markers(ci, JPEG_APP0 + 14, 0xFFFF); /* Adobe's, for its CMYK */
    jpeg_read_header(ci, TRUE);
    bool cmyk = ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK;
    bool gray = ci->jpeg_color_space == JCS_GRAYSCALE;
    ci->out_color_space = cmyk ? JCS_CMYK : gray ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(ci);
    int64_t w = ci->output_width, h = ci->output_height;
    int n = ci->output_components;
    if (n != (cmyk ? 4 : gray ? 1 : 3))
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: a JPEG of %d components", name, n);
    if (w * h > IMAGE_MAX_PIXELS)
        return dlrt_fail(err, DLRT_E_RANGE, "%s: %lldx%lld pixels, more than %lld", name,
                         (long long)w, (long long)h, (long long)IMAGE_MAX_PIXELS);
    js->row = malloc((size_t)(w * n));
    if (!js->row)
        return dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory", name);
    if (dlrt_image_alloc(img, channels ? channels : gray ? 1 : 3, h, w, NULL) != DLRT_OK)
        return dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory for %lldx%lld pixels", name,
                         (long long)w, (long long)h);
    bool adobe = false; /* Adobe's CMYK is stored inverted */
    for (jpeg_saved_marker_ptr mk = ci->marker_list; mk; mk = mk->next)
        adobe |= mk->marker == JPEG_APP0 + 14 && mk->data_length >= 5 &&
                 memcmp(mk->data, "Adobe", 5) == 0;
    while (ci->output_scanline < ci->output_height) {
        int64_t y = ci->output_scanline;
        JSAMPROW rows[1] = {js->row};
        jpeg_read_scanlines(ci, rows, 1);
        if (cmyk) /* to RGB in place, 4 bytes a pixel to 3 */
            for (int64_t x = 0; x < w; x++) {
                unsigned k = js->row[x * 4 + 3];
                unsigned char rgb[3];
                for (int c = 0; c < 3; c++) {
                    unsigned v = js->row[x * 4 + c];
                    rgb[c] = (unsigned char)(adobe ? (v * k + 127) / 255
                                                   : ((255 - v) * (255 - k) + 127) / 255);
                }
                memcpy(js->row + x * 3, rgb, 3);
            }
        put_row(img, y, js->row, gray ? 1 : 3, 8);
    }
    jpeg_finish_decompress(ci);
    return DLRT_OK;
}

static DlrtStatus decode_jpeg(DlrtImage *img, const unsigned char *data, size_t size,
                              const char *name, int channels, DlrtError *err) {
    JpegState *js = calloc(1, sizeof *js);
    if (!js)
        return dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory for libjpeg", name);
    js->cinfo.err = jpeg_std_error(&js->errors.mgr);
    js->errors.mgr.error_exit = jpeg_on_error;
    js->errors.mgr.emit_message = jpeg_on_message;
    js->errors.mgr.output_message = jpeg_on_output;
    DlrtStatus st = jpeg_decode(js, data, size, img, name, channels, err);
    jpeg_destroy_decompress(&js->cinfo);
    free(js->row);
    free(js);
    if (st != DLRT_OK)
        dlrt_image_free(img);
    return st;
}

/* ---- the entry points --------------------------------------------------- */

DlrtImageFormat dlrt_image_sniff(const unsigned char *head, size_t n) {
    static const unsigned char png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (n >= 8 && memcmp(head, png_sig, 8) == 0)
        return DLRT_IMAGE_PNG;
    if (n >= 3 && head[0] == 0xFF && head[1] == 0xD8 && head[2] == 0xFF)
        return DLRT_IMAGE_JPEG;
    return DLRT_IMAGE_UNKNOWN;
}

DlrtStatus dlrt_image_decode(DlrtImage *img, const unsigned char *data, size_t size,
                             const char *name, int channels, DlrtError *err) {
    *img = (DlrtImage){0};
    if (channels != 0 && channels != 1 && channels != 3)
        return dlrt_fail(err, DLRT_E_ARG, "%s: images have 1 or 3 channels, not %d", name,
                         channels);
    switch (dlrt_image_sniff(data, size)) {
    case DLRT_IMAGE_PNG: return decode_png(img, data, size, name, channels, err);
    case DLRT_IMAGE_JPEG: return decode_jpeg(img, data, size, name, channels, err);
    default:
        if (size == 0)
            return dlrt_fail(err, DLRT_E_FORMAT, "%s: the file is empty", name);
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: not a PNG or JPEG image", name);
    }
}

DlrtStatus dlrt_image_read(DlrtImage *img, const char *path, int channels, DlrtError *err) {
    unsigned char *data;
    size_t size;
    *img = (DlrtImage){0};
    DlrtStatus st = dlrt_read_file(path, &data, &size, err);
    if (st == DLRT_OK)
        st = dlrt_image_decode(img, data, size, path, channels, err);
    free(data);
    return st;
}
