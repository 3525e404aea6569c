/*! Floor division and remainder for one unsigned integer type (or bool), x // 0 = 0.
   A template: @T@ is the C type, @S@ its suffix; csource._helpers instantiates it. */
static inline @T@ td_floordiv_@S@(@T@ a, @T@ b) { return b == 0 ? 0 : (@T@)(a / b); }
static inline @T@ td_mod_@S@(@T@ a, @T@ b) { return b == 0 ? 0 : (@T@)(a % b); }
