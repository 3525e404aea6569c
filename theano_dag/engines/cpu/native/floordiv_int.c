/*! Python's floor division and remainder for one signed integer type, as numpy gives
   them. A template: @T@ is the C type, @S@ its suffix (i8, i16, ...); csource._helpers
   instantiates it per dtype. */
static inline @T@ td_floordiv_@S@(@T@ a, @T@ b) {
    if (b == 0) return 0;
    if (b == -1) return (@T@)(0 - a);
    @T@ q = (@T@)(a / b), r = (@T@)(a % b);
    return (r != 0 && ((r < 0) != (b < 0))) ? (@T@)(q - 1) : q;
}
static inline @T@ td_mod_@S@(@T@ a, @T@ b) {
    if (b == 0 || b == -1) return 0;
    @T@ r = (@T@)(a % b);
    return (r != 0 && ((r < 0) != (b < 0))) ? (@T@)(r + b) : r;
}
