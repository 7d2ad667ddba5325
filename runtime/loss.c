/* loss.c — losses and accuracy.
 *
 * Cross-entropy goes through log-sum-exp with the row's largest logit
 * subtracted first and the sum kept in double: each row's term is
 * log(sum exp(x - max)) + (max - x[label]), two parts that are each >= 0
 * (the sum holds exp(0) = 1, and max >= x[label]), so the loss is never
 * negative and stays finite for any finite logits, 1e30 and -1e30 included.
 * Gradients are computed in double and rounded to float once.
 *
 * A label outside [0, classes) is the caller's mistake (dlrt_dataset_check
 * catches it when a dataset is loaded); dlrt_cross_entropy then reads no
 * logit out of bounds, returns NAN and, when grad is not NULL, sets every
 * gradient to 0 so that an optimizer step leaves the weights as they were.
 * Means over no rows are 0. */
#include <math.h>

#include "dlrt.h"

/* Whether every label is a valid class index. */
static bool labels_in_range(const int32_t *labels, int64_t n, int64_t classes) {
    for (int64_t i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= classes)
            return false;
    return true;
}

/* The index of the largest value, the first one on ties. */
static int64_t row_argmax(const float *x, int64_t classes) {
    int64_t best = 0;
    for (int64_t j = 1; j < classes; j++)
        if (x[j] > x[best])
            best = j;
    return best;
}

/* One row's -log softmax(x)[label]; with grad, also (softmax - onehot) * scale. */
static double row_cross_entropy(const float *x, int64_t classes, int32_t label,
                                double scale, float *grad) {
    double max = x[row_argmax(x, classes)];
    double sum = 0.0;
    for (int64_t j = 0; j < classes; j++)
        sum += exp((double)x[j] - max);
    if (grad) {
        for (int64_t j = 0; j < classes; j++) {
            double p = exp((double)x[j] - max) / sum;
            grad[j] = (float)((p - (j == label ? 1.0 : 0.0)) * scale);
        }
    }
    return log(sum) + (max - (double)x[label]);
}

double dlrt_cross_entropy(const float *logits, const int32_t *labels, int64_t n,
                          int64_t classes, float *grad) {
    if (n <= 0)
        return 0.0;
    if (classes <= 0 || !labels_in_range(labels, n, classes)) {
        if (grad && classes > 0)
            dlrt_init_constant(grad, n * classes, 0.0f);
        return NAN;
    }
    double scale = 1.0 / (double)n;
    double total = 0.0;
    for (int64_t i = 0; i < n; i++)
        total += row_cross_entropy(logits + i * classes, classes, labels[i], scale,
                                   grad ? grad + i * classes : NULL);
    return total / (double)n;
}

double dlrt_mse(const float *pred, const float *target, int64_t n, int64_t size,
                float *grad) {
    if (n <= 0 || size <= 0)
        return 0.0;
    int64_t count = n * size;
    double scale = 2.0 / (double)count;
    double total = 0.0;
    for (int64_t i = 0; i < count; i++) {
        double d = (double)pred[i] - (double)target[i];
        total += d * d;
        if (grad)
            grad[i] = (float)(d * scale);
    }
    return total / (double)count;
}

int64_t dlrt_count_correct(const float *logits, const int32_t *labels, int64_t n,
                           int64_t classes) {
    if (classes <= 0)
        return 0;
    int64_t correct = 0;
    for (int64_t i = 0; i < n; i++)
        if (row_argmax(logits + i * classes, classes) == labels[i])
            correct++;
    return correct;
}
