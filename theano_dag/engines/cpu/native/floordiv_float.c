/*! numpy's npy_divmod for one float type, and the floor division and remainder built
   on it. A template: @T@ is the C type, @S@ its suffix (f32, f64); csource._helpers
   instantiates it. */
static inline @T@ td_divmod_@S@(@T@ a, @T@ b, @T@ *modulus) {
    @T@ mod = fmod(a, b), div, floordiv;
    if (b == 0) { *modulus = mod; return a / b; }
    div = (a - mod) / b;
    if (mod != 0) {
        if ((b < 0) != (mod < 0)) { mod += b; div -= (@T@)1; }
    } else {
        mod = copysign((@T@)0, b);
    }
    if (div != 0) {
        floordiv = floor(div);
        if (div - floordiv > (@T@)0.5) floordiv += (@T@)1;
    } else {
        floordiv = copysign((@T@)0, a / b);
    }
    *modulus = mod;
    return floordiv;
}
static inline @T@ td_floordiv_@S@(@T@ a, @T@ b) { @T@ m; return td_divmod_@S@(a, b, &m); }
static inline @T@ td_mod_@S@(@T@ a, @T@ b) {
    @T@ m;
    if (b == 0) return fmod(a, b);
    td_divmod_@S@(a, b, &m);
    return m;
}
