/* dlrt_kernels.h — the kernels' prototypes, for one element type.
 *
 * dlrt.h includes this file twice: with DLRT_REAL float and DLRT_K(f) f
 * (dlrt_relu_forward), then with double and f##_f64
 * (dlrt_relu_forward_f64).  Include dlrt.h, not this file; it has no
 * include guard on purpose.  The sizes, layouts and conventions are those
 * described in dlrt.h above the kernels.  Sectioned by the file of
 * runtime/kernels/ that implements each family. */

/* ---- activation.inc: relu, sigmoid, tanh, leaky_relu --------------------- */

/* Elementwise over count values.  The backward kernels take the forward
 * result y (relu: y > 0; sigmoid: y (1 - y); tanh: 1 - y^2). */
void DLRT_K(dlrt_relu_forward)(int64_t count, const DLRT_REAL *x, DLRT_REAL *y);
void DLRT_K(dlrt_relu_backward)(int64_t count, const DLRT_REAL *dy, const DLRT_REAL *y,
                                DLRT_REAL *dx);
void DLRT_K(dlrt_sigmoid_forward)(int64_t count, const DLRT_REAL *x, DLRT_REAL *y);
void DLRT_K(dlrt_sigmoid_backward)(int64_t count, const DLRT_REAL *dy, const DLRT_REAL *y,
                                   DLRT_REAL *dx);
void DLRT_K(dlrt_tanh_forward)(int64_t count, const DLRT_REAL *x, DLRT_REAL *y);
void DLRT_K(dlrt_tanh_backward)(int64_t count, const DLRT_REAL *dy, const DLRT_REAL *y,
                                DLRT_REAL *dx);
/* y = x for x > 0, slope x otherwise (torch.nn.LeakyReLU); backward from x. */
void DLRT_K(dlrt_leaky_relu_forward)(int64_t count, DLRT_REAL slope, const DLRT_REAL *x,
                                     DLRT_REAL *y);
void DLRT_K(dlrt_leaky_relu_backward)(int64_t count, DLRT_REAL slope, const DLRT_REAL *dy,
                                      const DLRT_REAL *x, DLRT_REAL *dx);
/* y = x for x > 0, alpha (exp(x) - 1) otherwise (torch.nn.ELU, alpha 0 or
 * more); backward from y: dy where y > 0, dy (y + alpha) otherwise. */
void DLRT_K(dlrt_elu_forward)(int64_t count, DLRT_REAL alpha, const DLRT_REAL *x, DLRT_REAL *y);
void DLRT_K(dlrt_elu_backward)(int64_t count, DLRT_REAL alpha, const DLRT_REAL *dy,
                               const DLRT_REAL *y, DLRT_REAL *dx);

/* ---- conv.inc: 2-d convolution ------------------------------------------- */

/* y[n,f,oh,ow] = conv(x[n,c,h,w], w[f,c/groups,kh,kw]) + b[f] (b may be NULL). */
void DLRT_K(dlrt_conv2d_forward)(const DlrtConv *cv, int64_t n, const DLRT_REAL *x,
                                 const DLRT_REAL *w, const DLRT_REAL *b, DLRT_REAL *y,
                                 DLRT_REAL *work, int threads);
/* y = conv(x, w) * scale[f] + shift[f]: a convolution with an inference
 * batchnorm folded in (conv2d {batchnorm=true}; dlrt_batchnorm_fold gives
 * scale and shift). */
void DLRT_K(dlrt_conv2d_forward_folded)(const DlrtConv *cv, int64_t n, const DLRT_REAL *x,
                                        const DLRT_REAL *w, const DLRT_REAL *scale,
                                        const DLRT_REAL *shift, DLRT_REAL *y, DLRT_REAL *work,
                                        int threads);
/* dx[n,c,h,w] from dy[n,f,oh,ow] and w; with relu_y (may be NULL), the
 * ReLU's gradient too: zero where relu_y[n,c,h,w] is not positive
 * (conv2d_grad_input {relu_grad=true}). */
void DLRT_K(dlrt_conv2d_backward_input)(const DlrtConv *cv, int64_t n, const DLRT_REAL *dy,
                                        const DLRT_REAL *w, const DLRT_REAL *relu_y, DLRT_REAL *dx,
                                        DLRT_REAL *work, int threads);
/* dw[f,c/groups,kh,kw], summed over the batch, from dy and x. */
void DLRT_K(dlrt_conv2d_backward_weight)(const DlrtConv *cv, int64_t n, const DLRT_REAL *dy,
                                         const DLRT_REAL *x, DLRT_REAL *dw, DLRT_REAL *work, int threads);

/* ---- dense.inc: dense layers, bias gradients ----------------------------- */

/* y[n,out] = act(x[n,in] w[out,in]^T + b[out]) (b may be NULL) (torch.nn.Linear,
 * then the activation act; slope is DLRT_ACT_LEAKY_RELU's slope or
 * DLRT_ACT_ELU's alpha). */
void DLRT_K(dlrt_dense_forward)(int64_t n, int64_t in, int64_t out, const DLRT_REAL *x,
                                const DLRT_REAL *w, const DLRT_REAL *b, DlrtActivation act,
                                DLRT_REAL slope, DLRT_REAL *y);
/* dx[n,in] = dy[n,out] w[out,in]; with relu_y (may be NULL), zero where
 * relu_y[n,in] is not positive (dense_grad_input {relu_grad=true}). */
void DLRT_K(dlrt_dense_backward_input)(int64_t n, int64_t in, int64_t out, const DLRT_REAL *dy,
                                       const DLRT_REAL *w, const DLRT_REAL *relu_y, DLRT_REAL *dx);
/* dw[out,in] = dy^T x, summed over the batch */
void DLRT_K(dlrt_dense_backward_weight)(int64_t n, int64_t in, int64_t out, const DLRT_REAL *dy,
                                        const DLRT_REAL *x, DLRT_REAL *dw);
/* db[c] = the sum of dy[n,c,spatial] over n and spatial (a bias gradient). */
void DLRT_K(dlrt_bias_backward)(int64_t n, int64_t c, int64_t spatial, const DLRT_REAL *dy,
                                DLRT_REAL *db);

/* ---- recurrent.inc: RNN, LSTM and GRU layers ----------------------------- */

/* One layer in one direction (DlrtRnn r) over x [n, T, F], PyTorch's
 * semantics (torch.nn.RNN, LSTM, GRU with batch_first=True); weights as
 * DlrtCell says, b_ih and b_hh may each be NULL (zero).  y is [n, T, H], or
 * with r->last the final state [n, H] (PyTorch's h_n for the direction).
 * lengths (NULL: all T; each in [0, T]) gives each sample's steps, as a
 * packed sequence does: sample i runs steps t < lengths[i] only (reverse:
 * from lengths[i] - 1 down to 0), y is 0 at the steps after, and last gives
 * the state after its last real step.  h0 and c0 [n, H] are the initial
 * states (NULL: zero; c0 for LSTM only); hn and cn [n, H] (NULL: not
 * wanted; cn for LSTM only) get the final ones, which a stateful layer's
 * next chunk starts from: they may be h0 and c0.  work:
 * dlrt_rnn_workspace(r, n', threads) elements for some n' >= n.
 *
 * Training passes hprev and cache, which the backward pass reads:
 * hprev [n, T, H] gets the state each step read (0 at padded steps), cache
 * [n, T, S] what the cell computed (S = H for an RNN, 5H for an LSTM, 4H for
 * a GRU; layout in recurrent.inc; 0 at padded steps).  At inference both
 * are NULL. */
void DLRT_K(dlrt_rnn_forward)(const DlrtRnn *r, int64_t n, const DLRT_REAL *x,
                              const DLRT_REAL *w_ih, const DLRT_REAL *w_hh,
                              const DLRT_REAL *b_ih, const DLRT_REAL *b_hh,
                              const int32_t *lengths, const DLRT_REAL *h0, const DLRT_REAL *c0,
                              DLRT_REAL *hn, DLRT_REAL *cn, DLRT_REAL *y, DLRT_REAL *hprev,
                              DLRT_REAL *cache,
                              DLRT_REAL *work, int threads);
/* Backpropagation through time, the recurrence only: from dy (laid out as
 * y) and the training forward's cache and hprev (and its lengths and c0),
 * dpre_ih [n, T, G*H], the gradient of each step's W_ih x_t + b_ih, and
 * dpre_hh [n, T, G*H], that of W_hh h_prev + b_hh; both 0 at padded steps.
 * They differ only for a GRU (its n gate's hidden side is scaled by r):
 * for an RNN or LSTM dpre_hh may be NULL, and dpre_ih serves as both.  The
 * dense kernels then give dx = dpre_ih W_ih, dW_ih = dpre_ih^T x, dW_hh =
 * dpre_hh^T hprev and the bias gradients, over all n*T rows.  No gradient
 * flows into h0 or c0.  work: dlrt_rnn_backward_workspace(r, n', threads)
 * elements for some n' >= n. */
void DLRT_K(dlrt_rnn_backward)(const DlrtRnn *r, int64_t n, const DLRT_REAL *dy,
                               const DLRT_REAL *cache, const DLRT_REAL *hprev,
                               const DLRT_REAL *w_hh, const int32_t *lengths,
                               const DLRT_REAL *c0, DLRT_REAL *dpre_ih, DLRT_REAL *dpre_hh,
                               DLRT_REAL *work, int threads);

/* ---- elementwise.inc: add, sum, dropout ---------------------------------- */

/* y = a + b; y may alias a or b. */
void DLRT_K(dlrt_add)(int64_t count, const DLRT_REAL *a, const DLRT_REAL *b, DLRT_REAL *y);
/* y = relu(a + b) in one pass (add {relu=true}); y may alias a or b. */
void DLRT_K(dlrt_add_relu)(int64_t count, const DLRT_REAL *a, const DLRT_REAL *b, DLRT_REAL *y);
/* dx = relu_y > 0 ? a + b : 0, a gradient sum through a ReLU's gradient
 * (add {relu_grad=true}); dx may alias a, b or relu_y. */
void DLRT_K(dlrt_add_relu_grad)(int64_t count, const DLRT_REAL *a, const DLRT_REAL *b,
                                const DLRT_REAL *relu_y, DLRT_REAL *dx);

/* y = terms[0] + terms[1] + ... + terms[nterms - 1], added in that order
 * (nterms >= 2: an add of several operands, a chain of adds merged by the
 * fuse pass), then relu(y) with relu, or, with relu_y (may be NULL),
 * relu_y > 0 ? y : 0; the same bits as the adds apart.  y may alias any
 * term or relu_y. */
void DLRT_K(dlrt_sum)(int64_t count, int nterms, const DLRT_REAL *const *terms, bool relu,
                      const DLRT_REAL *relu_y, DLRT_REAL *y);

/* Dropout in training: mask = 0 with probability p, else 1/(1-p), drawn
 * from seed; y = x mask.  Backward: dx = dy mask, and with relu_y (may be
 * NULL) zero where relu_y is not positive (dropout_grad {relu_grad=true}). */
void DLRT_K(dlrt_dropout_forward)(int64_t count, DLRT_REAL p, uint64_t seed, const DLRT_REAL *x,
                                  DLRT_REAL *y, DLRT_REAL *mask);
void DLRT_K(dlrt_dropout_backward)(int64_t count, const DLRT_REAL *dy, const DLRT_REAL *mask,
                                   const DLRT_REAL *relu_y, DLRT_REAL *dx);

/* ---- pool.inc: max, average and global average pooling ------------------- */

void DLRT_K(dlrt_maxpool_forward)(const DlrtPool *p, int64_t n, const DLRT_REAL *x,
                                  DLRT_REAL *y);
/* dx from dy, finding each window's maximum (the first, on ties) in x again;
 * with p->relu_grad, only to maxima that are positive. */
void DLRT_K(dlrt_maxpool_backward)(const DlrtPool *p, int64_t n, const DLRT_REAL *dy,
                                   const DLRT_REAL *x, DLRT_REAL *dx);
/* y as dlrt_maxpool_forward, and argmax[n,c,oh,ow]: each window's maximum's
 * index in its plane of x, the one dlrt_maxpool_backward finds (the first
 * of equal values, or the last NaN; -1 for an empty window), or -1 with
 * p->relu_grad where the maximum is not positive (maxpool_train). */
void DLRT_K(dlrt_maxpool_forward_argmax)(const DlrtPool *p, int64_t n, const DLRT_REAL *x,
                                         DLRT_REAL *y, int32_t *argmax);
/* dx[n,c,h,w] from dy[n,c,oh,ow] and maxpool_forward_argmax's argmax (of
 * the same pooling p): each dy to its window's maximum, summed in window
 * order (the bits of dlrt_maxpool_backward); nothing where argmax is -1
 * (maxpool_grad_argmax). */
void DLRT_K(dlrt_maxpool_backward_argmax)(const DlrtPool *p, int64_t n, const DLRT_REAL *dy,
                                          const int32_t *argmax, DLRT_REAL *dx);
void DLRT_K(dlrt_avgpool_forward)(const DlrtPool *p, int64_t n, const DLRT_REAL *x,
                                  DLRT_REAL *y);
void DLRT_K(dlrt_avgpool_backward)(const DlrtPool *p, int64_t n, const DLRT_REAL *dy,
                                   DLRT_REAL *dx);
/* y[n,c] = the mean of x[n,c,hw]; backward spreads dy[n,c] / hw, zero
 * where relu_y (may be NULL; laid out as dx) is not positive
 * (globalavgpool_grad {relu_grad=true}). */
void DLRT_K(dlrt_globalavgpool_forward)(int64_t n, int64_t c, int64_t hw, const DLRT_REAL *x,
                                        DLRT_REAL *y);
void DLRT_K(dlrt_globalavgpool_backward)(int64_t n, int64_t c, int64_t hw, const DLRT_REAL *dy,
                                         const DLRT_REAL *relu_y, DLRT_REAL *dx);

/* ---- norm.inc: softmax, local response and batch normalization ----------- */

/* Softmax over the middle dimension of [outer, axis, inner] (outer includes
 * the batch); backward dx = y (dy - sum(dy y)) along the axis. */
void DLRT_K(dlrt_softmax_forward)(int64_t outer, int64_t axis, int64_t inner,
                                  const DLRT_REAL *x, DLRT_REAL *y);
void DLRT_K(dlrt_softmax_backward)(int64_t outer, int64_t axis, int64_t inner,
                                   const DLRT_REAL *dy, const DLRT_REAL *y, DLRT_REAL *dx);

/* Local response normalization (DlrtLrn); backward from x and y, zero
 * where x is not positive with l->relu_grad (lrn_grad {relu_grad=true}:
 * x is a ReLU's result). */
void DLRT_K(dlrt_lrn_forward)(const DlrtLrn *l, int64_t n, const DLRT_REAL *x, DLRT_REAL *y);
void DLRT_K(dlrt_lrn_backward)(const DlrtLrn *l, int64_t n, const DLRT_REAL *dy,
                               const DLRT_REAL *x, const DLRT_REAL *y, DLRT_REAL *dx);

/* Batch normalization over [n, c, hw] per channel (torch.nn.BatchNorm1d/2d):
 * training mode normalizes with the batch's statistics, writes them to
 * mean[c] and invstd[c] = 1/sqrt(var + eps) for the backward pass, and
 * updates the running statistics in place; eval mode uses the running ones. */
void DLRT_K(dlrt_batchnorm_forward_train)(int64_t n, int64_t c, int64_t hw, DLRT_REAL eps,
                                          DLRT_REAL momentum, const DLRT_REAL *x,
                                          const DLRT_REAL *w, const DLRT_REAL *b,
                                          DLRT_REAL *running_mean, DLRT_REAL *running_var,
                                          DLRT_REAL *y, DLRT_REAL *mean, DLRT_REAL *invstd);
/* The training forward's y again from the mean and invstd it returned,
 * bit for bit (what the recompute pass emits instead of keeping y). */
void DLRT_K(dlrt_batchnorm_normalize)(int64_t n, int64_t c, int64_t hw, const DLRT_REAL *x,
                                      const DLRT_REAL *mean, const DLRT_REAL *invstd,
                                      const DLRT_REAL *w, const DLRT_REAL *b, DLRT_REAL *y);
/* A batchnorm at inference after a convolution with bias b (or NULL), as
 * one affine map of the convolution's output per channel: scale = w /
 * sqrt(running_var + eps), shift = bias + (b - running_mean) scale. */
void DLRT_K(dlrt_batchnorm_fold)(int64_t c, DLRT_REAL eps, const DLRT_REAL *b, const DLRT_REAL *w,
                                 const DLRT_REAL *bias, const DLRT_REAL *running_mean,
                                 const DLRT_REAL *running_var, DLRT_REAL *scale, DLRT_REAL *shift);
void DLRT_K(dlrt_batchnorm_forward_eval)(int64_t n, int64_t c, int64_t hw, DLRT_REAL eps,
                                         const DLRT_REAL *x, const DLRT_REAL *w,
                                         const DLRT_REAL *b, const DLRT_REAL *running_mean,
                                         const DLRT_REAL *running_var, DLRT_REAL *y);
/* dx from dy, x and the saved statistics; dw[c] (db is dlrt_bias_backward). */
void DLRT_K(dlrt_batchnorm_backward_input)(int64_t n, int64_t c, int64_t hw,
                                           const DLRT_REAL *dy, const DLRT_REAL *x,
                                           const DLRT_REAL *mean, const DLRT_REAL *invstd,
                                           const DLRT_REAL *w, DLRT_REAL *dx);
void DLRT_K(dlrt_batchnorm_backward_weight)(int64_t n, int64_t c, int64_t hw,
                                            const DLRT_REAL *dy, const DLRT_REAL *x,
                                            const DLRT_REAL *mean, const DLRT_REAL *invstd,
                                            DLRT_REAL *dw);

/* ---- copy.inc: concat and slice, layouts ------------------------------------------ */

/* Copies a block: for each of outer rows, len floats from src + row *
 * src_stride + src_offset to dst + row * dst_stride + dst_offset.  concat is
 * one call per operand, and its gradient (slice) one per result. */
void DLRT_K(dlrt_copy_rows)(int64_t outer, int64_t len, const DLRT_REAL *src,
                            int64_t src_stride, int64_t src_offset, DLRT_REAL *dst,
                            int64_t dst_stride, int64_t dst_offset);
/* The same into a dense dst (outer rows of len), zero where relu_y is not
 * positive: slice {relu_grad=true}.  Row r of relu_y starts at relu_y + r *
 * relu_stride + relu_offset: laid out as dst (stride len, offset 0) when it
 * is the ReLU's result, or as src when it is the concatenation that took
 * that result in (the same slice of it is the ReLU's result). */
void DLRT_K(dlrt_copy_rows_relu_grad)(int64_t outer, int64_t len, const DLRT_REAL *src,
                                      int64_t src_stride, int64_t src_offset,
                                      const DLRT_REAL *relu_y, int64_t relu_stride,
                                      int64_t relu_offset, DLRT_REAL *dst);

/* Blocked layouts (dlc's layout pass; docs/ir.md#layouts): n samples of c
 * channels of hw positions, plain (x[s][c][p]) to blocks of b channels
 * (y[s][c / b][p][c % b], the last block's missing channels zero), and
 * back.  The reorder op. */
void DLRT_K(dlrt_to_blocked)(int64_t n, int64_t c, int64_t hw, int64_t b, const DLRT_REAL *x,
                             DLRT_REAL *y);
void DLRT_K(dlrt_from_blocked)(int64_t n, int64_t c, int64_t hw, int64_t b,
                               const DLRT_REAL *x, DLRT_REAL *y);

/* ---- update.inc: SGD and Adam, gradient clipping --------------------------- */

/* The updates of torch.optim.SGD and torch.optim.Adam for one parameter of
 * count values, in place.  g is the gradient (left unchanged);
 * momentum_buffer is NULL without momentum (and ignored when momentum is 0).
 * Adam's step is 1 on the first update; a smaller step is taken as 1. */
void DLRT_K(dlrt_sgd_update)(int64_t count, const DLRT_REAL *g, DLRT_REAL lr,
                             DLRT_REAL momentum, bool nesterov, DLRT_REAL weight_decay,
                             DLRT_REAL *p, DLRT_REAL *momentum_buffer);
/* dlrt_sgd_update (not Nesterov) of a dense layer's weight p [out, in]
 * with the gradient dlrt_dense_backward_weight would give for dy [n, out]
 * and x [n, in], which is never stored: accumulated by the product into
 * the momentum buffer (or with -lr into p), tile by tile.  The same sums
 * as the two calls in another order (weight decay joins the buffer before
 * the gradient); at n = 1 the same arithmetic as theirs. */
void DLRT_K(dlrt_dense_sgd_update)(int64_t n, int64_t in, int64_t out, const DLRT_REAL *dy,
                                   const DLRT_REAL *x, DLRT_REAL lr, DLRT_REAL momentum,
                                   DLRT_REAL weight_decay, DLRT_REAL *p,
                                   DLRT_REAL *momentum_buffer);
void DLRT_K(dlrt_adam_update)(int64_t count, const DLRT_REAL *g, DLRT_REAL lr, int32_t step,
                              DLRT_REAL beta1, DLRT_REAL beta2, DLRT_REAL eps,
                              DLRT_REAL weight_decay, DLRT_REAL *p, DLRT_REAL *exp_avg,
                              DLRT_REAL *exp_avg_sq);
/* dlrt_adam_update of a dense layer's weight p [out, in] with the gradient
 * dlrt_dense_backward_weight would give for dy [n, out] and x [n, in],
 * computed a block at a time and never stored whole (dense_adam_update). */
void DLRT_K(dlrt_dense_adam_update)(int64_t n, int64_t in, int64_t out, const DLRT_REAL *dy,
                                    const DLRT_REAL *x, DLRT_REAL lr, int32_t step,
                                    DLRT_REAL beta1, DLRT_REAL beta2, DLRT_REAL eps,
                                    DLRT_REAL weight_decay, DLRT_REAL *p, DLRT_REAL *exp_avg,
                                    DLRT_REAL *exp_avg_sq);
/* Gradient clipping by total norm (torch.nn.utils.clip_grad_norm_, the
 * IR's clip_norm and clip_scale).  dlrt_sum_squares: the sum of g^2 over
 * count values, in double (the same bits for any thread count).
 * dlrt_clip_coefficient: from the sum over every gradient, what each is
 * multiplied by, min(max_norm / (sqrt(sum) + 1e-6), 1) rounded as PyTorch
 * rounds it; 1 for max_norm 0 (no clipping), NaN for a NaN sum.
 * dlrt_clip_scale: out = g * coef; out may be g. */
double DLRT_K(dlrt_sum_squares)(int64_t count, const DLRT_REAL *g);
DLRT_REAL DLRT_K(dlrt_clip_coefficient)(double sum_squares, DLRT_REAL max_norm);
void DLRT_K(dlrt_clip_scale)(int64_t count, const DLRT_REAL *g, DLRT_REAL coef, DLRT_REAL *out);

/* ---- loss.inc: losses and accuracy --------------------------------------- */

/* Mean cross-entropy of n rows of logits (classes each) against labels,
 * through log-sum-exp: never negative, finite for finite logits.  When grad
 * is not NULL it receives d(loss)/d(logits) (softmax - onehot) / n.  A label
 * outside [0, classes) gives NAN and a zero gradient; n == 0 gives 0. */
double DLRT_K(dlrt_cross_entropy)(const DLRT_REAL *logits, const int32_t *labels, int64_t n,
                                  int64_t classes, DLRT_REAL *grad);
/* One rank's part of a cross-entropy whose batch is split among ranks
 * (data-parallel training): the n rows' losses summed and divided by
 * `total`, the rows of the whole batch, and in grad (softmax - onehot) /
 * total, so that the ranks' gradients add up to the whole batch's.  With
 * total == n, dlrt_cross_entropy's results, bit for bit. */
double DLRT_K(dlrt_cross_entropy_part)(const DLRT_REAL *logits, const int32_t *labels, int64_t n,
                                       int64_t classes, int64_t total, DLRT_REAL *grad);
/* Mean squared error over n * size values; grad as above (may be NULL). */
double DLRT_K(dlrt_mse)(const DLRT_REAL *pred, const DLRT_REAL *target, int64_t n, int64_t size,
                        DLRT_REAL *grad);
/* Rows whose largest logit (the first, on ties) is at the label. */
int64_t DLRT_K(dlrt_count_correct)(const DLRT_REAL *logits, const int32_t *labels, int64_t n,
                                   int64_t classes);

/* ---- embedding.inc: torch.nn.Embedding ---------------------------------- */

/* y[i] = w[tokens[i]] for count ids, rows of dim (w is [vocab, dim]); an id
 * outside 0 to vocab-1 gives a zero row (dlrt_check_tokens refuses it
 * first). */
void DLRT_K(dlrt_embedding_forward)(int64_t count, int64_t vocab, int64_t dim,
                                    const int32_t *tokens, const DLRT_REAL *w, DLRT_REAL *y);
/* dw[vocab, dim] = the sum of dy[i] over the ids i of each token, in order. */
void DLRT_K(dlrt_embedding_backward)(int64_t count, int64_t vocab, int64_t dim,
                                     const DLRT_REAL *dy, const int32_t *tokens, DLRT_REAL *dw);

/* ---- int8.c: quantize and dequantize (dlc --quantize=int8) ---------------- */

/* q = x / scale rounded half to even (rint), clamped to -128..127; NaN
 * gives 0.  scale is positive and finite. */
void DLRT_K(dlrt_quantize_s8)(int64_t count, const DLRT_REAL *x, DLRT_REAL scale, int8_t *q);
/* y = q * scale */
void DLRT_K(dlrt_dequantize_s8)(int64_t count, const int8_t *q, DLRT_REAL scale, DLRT_REAL *y);
