/* test_image.c — PNG and JPEG decoding, transforms, image folders and the
 * loader (runtime/image.c, transform.c, imagefolder.c).
 *
 *   test_image                          the checks that need no files
 *   test_image decode FILE CH TF OUT    FILE decoded to CH channels (0:
 *                                       its own), transformed by TF (""
 *                                       for none, seed 0), written to OUT
 *                                       as a float32 .npy [C, H, W]
 *   test_image crop FILE CH T L H W OUT the box (T, L, H, W), as above
 *   test_image resized-crop FILE CH T L H W SH SW OUT
 *                                       the box resized to SH x SW
 *   test_image list ROOT VAL [all]      the classes and images of an image
 *                                       folder (VAL: the held-out fraction);
 *                                       with all, every training image
 *   test_image load ROOT C H W BATCH WORKERS TF
 *                                       one epoch of the loader, shuffled
 *                                       (seed 1): a checksum of its batches
 *                                       and the images per second
 *
 * Failures print "error: MESSAGE" and exit 1, for lit to check.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlrt.h"
#define HARNESS_FILE "test_image.c"
#include "harness.h"

static int fail(const DlrtError *err) {
    printf("error: %s\n", err->message);
    return 1;
}

static int write_npy(const char *path, const DlrtImage *img) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return 1;
    char header[128];
    int len = snprintf(header, sizeof header,
                       "{'descr': '<f4', 'fortran_order': False, 'shape': (%lld, %lld, %lld), }",
                       (long long)img->channels, (long long)img->height, (long long)img->width);
    int total = 10 + len + 1;
    int pad = (64 - total % 64) % 64;
    unsigned short hl = (unsigned short)(len + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hl & 0xff, f);
    fputc(hl >> 8, f);
    fwrite(header, 1, (size_t)len, f);
    for (int i = 0; i < pad; i++)
        fputc(' ', f);
    fputc('\n', f);
    fwrite(img->data, sizeof(float), (size_t)(img->channels * img->height * img->width), f);
    return fclose(f) != 0;
}

static int cmd_decode(int argc, char **argv) {
    if (argc != 6)
        return 2;
    DlrtError err = {0};
    DlrtImage img;
    DlrtTransform t;
    if (dlrt_transform_parse(&t, argv[4], &err) != DLRT_OK ||
        dlrt_image_read(&img, argv[2], atoi(argv[3]), &err) != DLRT_OK)
        return fail(&err);
    DlrtRng rng;
    dlrt_rng_seed(&rng, 0);
    if (dlrt_transform_apply(&t, &img, &rng, &err) != DLRT_OK) {
        dlrt_image_free(&img);
        return fail(&err);
    }
    printf("%s: %lld channels, %lldx%lld\n", argv[2], (long long)img.channels,
           (long long)img.width, (long long)img.height);
    int rc = write_npy(argv[5], &img);
    dlrt_image_free(&img);
    return rc;
}

/* crop and resized-crop: a fixed box, to compare with torchvision's
 * functional crop and resized_crop */
static int cmd_crop(int argc, char **argv, bool resize) {
    if (argc != (resize ? 11 : 9))
        return 2;
    DlrtError err = {0};
    DlrtImage img, box, out;
    if (dlrt_image_read(&img, argv[2], atoi(argv[3]), &err) != DLRT_OK)
        return fail(&err);
    DlrtStatus st = dlrt_image_crop(&img, &box, atoll(argv[4]), atoll(argv[5]), atoll(argv[6]),
                                    atoll(argv[7]), &err);
    dlrt_image_free(&img);
    if (st != DLRT_OK)
        return fail(&err);
    if (resize) {
        st = dlrt_image_resize(&box, &out, atoll(argv[8]), atoll(argv[9]), &err);
        dlrt_image_free(&box);
        if (st != DLRT_OK)
            return fail(&err);
    } else {
        out = box;
    }
    int rc = write_npy(argv[resize ? 10 : 8], &out);
    dlrt_image_free(&out);
    return rc;
}

static int cmd_list(int argc, char **argv) {
    if (argc != 4 && argc != 5)
        return 2;
    DlrtError err = {0};
    DlrtImageFolder train, val;
    bool all = argc == 5;
    double t0 = dlrt_clock();
    if (dlrt_image_folders(&train, &val, argv[2], atof(argv[3]), &err) != DLRT_OK)
        return fail(&err);
    double seconds = dlrt_clock() - t0;
    printf("classes:");
    for (int32_t k = 0; k < train.num_classes; k++)
        printf(" %s", train.classes[k]);
    printf("\ntrain: %lld images, val: %lld images\n", (long long)train.count,
           (long long)val.count);
    for (int64_t i = 0; i < train.count && (all || i < 6); i++)
        printf("train[%lld]: %s %d\n", (long long)i,
               all ? train.paths[i] : strrchr(train.paths[i], '/') + 1, train.labels[i]);
    for (int64_t i = 0; i < val.count && i < 3; i++)
        printf("val[%lld]: %s %d\n", (long long)i, strrchr(val.paths[i], '/') + 1, val.labels[i]);
    char *text = dlrt_image_classes_text(&train);
    for (char *c = text; *c; c++)
        if (*c == '\n')
            *c = '|';
    printf("metadata: %s\n", text);
    free(text);
    fprintf(stderr, "listed in %.3f s\n", seconds);
    dlrt_image_folder_free(&train);
    dlrt_image_folder_free(&val);
    return 0;
}

static int cmd_load(int argc, char **argv) {
    if (argc != 9)
        return 2;
    DlrtError err = {0};
    DlrtImageFolder f;
    DlrtTransform t;
    int64_t c = atoll(argv[3]), h = atoll(argv[4]), w = atoll(argv[5]), batch = atoll(argv[6]);
    if (dlrt_transform_parse(&t, argv[8], &err) != DLRT_OK ||
        dlrt_image_folders(&f, NULL, argv[2], 0, &err) != DLRT_OK)
        return fail(&err);
    DlrtLoader *l;
    if (dlrt_loader_open(&l, &f, &t, c, h, w, batch, true, 1, atoi(argv[7]), 4, &err) !=
        DLRT_OK) {
        dlrt_image_folder_free(&f);
        return fail(&err);
    }
    float *x = malloc(sizeof *x * (size_t)(batch * c * h * w));
    int32_t *y = malloc(sizeof *y * (size_t)batch);
    double sum = 0, t0 = dlrt_clock();
    int64_t n, total = 0, batches = 0;
    uint64_t labels = 0;
    DlrtStatus st = DLRT_OK;
    dlrt_loader_start_epoch(l, 0);
    while ((st = dlrt_loader_next(l, x, y, &n, &err)) == DLRT_OK && n > 0) {
        for (int64_t i = 0; i < n * c * h * w; i++)
            sum += (double)x[i] * (double)((i % 7) + 1) * (double)(batches % 5 + 1);
        for (int64_t i = 0; i < n; i++)
            labels = labels * 31 + (uint64_t)y[i];
        total += n;
        batches++;
    }
    double seconds = dlrt_clock() - t0;
    if (st == DLRT_OK)
        printf("%lld images in %lld batches, checksum %.6f, labels %016llx\n", (long long)total,
               (long long)batches, sum, (unsigned long long)labels);
    else
        printf("error after %lld batches: %s\n", (long long)batches, err.message);
    fprintf(stderr, "%.0f images/s\n", (double)total / (seconds > 0 ? seconds : 1e-9));
    free(x);
    free(y);
    dlrt_loader_close(l);
    dlrt_image_folder_free(&f);
    return st != DLRT_OK;
}

/* ---- the checks that need no files ---------------------------------------- */

static void test_sniff(void) {
    static const unsigned char png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    static const unsigned char jpg[3] = {0xFF, 0xD8, 0xFF};
    CHECK(dlrt_image_sniff(png, 8) == DLRT_IMAGE_PNG);
    CHECK(dlrt_image_sniff(jpg, 3) == DLRT_IMAGE_JPEG);
    CHECK(dlrt_image_sniff(png, 4) == DLRT_IMAGE_UNKNOWN);
    DlrtImage img;
    DlrtError err = {0};
    CHECK(dlrt_image_decode(&img, (const unsigned char *)"P5 1 1 255\n", 11, "x.pgm", 0, &err) ==
          DLRT_E_FORMAT);
    CHECK(strcmp(err.message, "x.pgm: not a PNG or JPEG image") == 0);
    CHECK(dlrt_image_decode(&img, png, 8, "short.png", 3, &err) == DLRT_E_FORMAT);
    CHECK(strstr(err.message, "short.png: bad PNG") != NULL);
    CHECK(img.data == NULL);
}

static void test_parse(void) {
    DlrtTransform t;
    DlrtError err = {0};
    CHECK(dlrt_transform_parse(&t, "", &err) == DLRT_OK && t.n == 0);
    CHECK(dlrt_transform_parse(&t, "random_resized_crop(224, scale=[0.5, 1]) -> hflip -> "
                                   "normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, "
                                   "0.225])", &err) == DLRT_OK);
    CHECK(t.n == 3 && t.step[0].height == 224 && t.step[0].width == 224);
    CHECK(t.step[0].scale[0] == 0.5 && t.step[1].p == 0.5 && t.step[2].nmean == 3);
    CHECK(dlrt_transform_parse(&t, "resize(256) -> center_crop(20, 30)", &err) == DLRT_OK);
    CHECK(t.step[0].width == 0 && t.step[1].height == 20 && t.step[1].width == 30);
    CHECK(dlrt_transform_parse(&t, "resize([32, 48])", &err) == DLRT_OK && t.step[0].width == 48);
    CHECK(dlrt_transform_parse(&t, "rotate(10)", &err) == DLRT_E_ARG);
    CHECK(strstr(err.message, "unknown step 'rotate'") != NULL);
    CHECK(dlrt_transform_parse(&t, "resize(0)", &err) == DLRT_E_ARG);
    CHECK(dlrt_transform_parse(&t, "resize(24) center_crop(2)", &err) == DLRT_E_ARG);
    CHECK(strstr(err.message, "expected '->' between steps") != NULL);
    CHECK(dlrt_transform_parse(&t, "normalize(mean=0.5)", &err) == DLRT_E_ARG);
    CHECK(dlrt_transform_parse(&t, "normalize(mean=0.5, std=0)", &err) == DLRT_E_ARG);
    CHECK(dlrt_transform_parse(&t, "hflip(p=2)", &err) == DLRT_E_ARG);
}

static void test_steps(void) {
    DlrtImage img, out;
    DlrtError err = {0};
    CHECK(dlrt_image_alloc(&img, 1, 4, 6, &err) == DLRT_OK);
    for (int i = 0; i < 24; i++)
        img.data[i] = (float)i;
    /* a resize to the same size is the identity */
    CHECK(dlrt_image_resize(&img, &out, 4, 6, &err) == DLRT_OK);
    CHECK(memcmp(out.data, img.data, sizeof(float) * 24) == 0);
    dlrt_image_free(&out);
    CHECK(dlrt_image_resize(&img, &out, 2, 3, &err) == DLRT_OK);
    /* the triangle over 3 inputs: weights 0.75, 0.75, 0.25 each way */
    CHECK(fabsf(out.data[0] - 5.0f) < 1e-5f);
    dlrt_image_free(&out);
    /* a centre crop larger than the image pads with zeros */
    DlrtTransform t;
    DlrtRng rng;
    dlrt_rng_seed(&rng, 0);
    CHECK(dlrt_transform_parse(&t, "center_crop(6, 8) -> hflip(p=1)", &err) == DLRT_OK);
    CHECK(dlrt_transform_apply(&t, &img, &rng, &err) == DLRT_OK);
    CHECK(img.height == 6 && img.width == 8);
    CHECK(img.data[0] == 0 && img.data[8 + 1] == 5 && img.data[8 + 6] == 0);
    CHECK(dlrt_transform_parse(&t, "normalize(mean=[0.5, 0.5], std=1)", &err) == DLRT_OK);
    CHECK(dlrt_transform_apply(&t, &img, &rng, &err) == DLRT_E_SHAPE);
    dlrt_image_free(&img);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "decode") == 0)
        return cmd_decode(argc, argv);
    if (argc > 1 && strcmp(argv[1], "crop") == 0)
        return cmd_crop(argc, argv, false);
    if (argc > 1 && strcmp(argv[1], "resized-crop") == 0)
        return cmd_crop(argc, argv, true);
    if (argc > 1 && strcmp(argv[1], "list") == 0)
        return cmd_list(argc, argv);
    if (argc > 1 && strcmp(argv[1], "load") == 0)
        return cmd_load(argc, argv);
    if (argc > 1) {
        fprintf(stderr, "test_image: unknown mode '%s'\n", argv[1]);
        return 2;
    }
    test_sniff();
    test_parse();
    test_steps();
    return harness_report();
}
