// The lookup of exp2_table.h's T[k mod 32] for a vector of k, per SIMD target.
// Highway per-target header: included once per target (foreach_target.h) by the files that use it.
#if defined(DRIFT_ARITH_EXP2_TABLE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DRIFT_ARITH_EXP2_TABLE_INL_H_
#undef DRIFT_ARITH_EXP2_TABLE_INL_H_
#else
#define DRIFT_ARITH_EXP2_TABLE_INL_H_
#endif

#include "arith/exp2_table.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace drift {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// T[k mod 32] for each lane's k (the low bits of ki). AVX-512 holds the 32-entry table in four
// registers and looks it up with two two-register permutes and a blend (a gather from memory cost
// a third of the fp32 exp's time); other targets gather.
template <class D>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> Exp2TableEntries(D d, hn::Vec<hn::RebindToUnsigned<D>> ki) {
  namespace k = exp2_table;
  const hn::RebindToUnsigned<D> du;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (hn::MaxLanes(du) == 8) {
    (void)d;
    const __m512i t0 = _mm512_load_si512(k::kTable), t1 = _mm512_load_si512(k::kTable + 8);
    const __m512i t2 = _mm512_load_si512(k::kTable + 16), t3 = _mm512_load_si512(k::kTable + 24);
    // permutex2var reads an index's low four bits (entry, then which register); bit 4 picks the pair.
    const __m512i low = _mm512_permutex2var_epi64(t0, ki.raw, t1);
    const __m512i high = _mm512_permutex2var_epi64(t2, ki.raw, t3);
    const __mmask8 upper = _mm512_test_epi64_mask(ki.raw, _mm512_set1_epi64(16));
    return hn::Vec<hn::RebindToUnsigned<D>>{_mm512_mask_blend_epi64(upper, low, high)};
  }
#endif
  const hn::RebindToSigned<D> di;
  return hn::GatherIndex(du, k::kTable, hn::BitCast(di, hn::And(ki, hn::Set(du, k::kTableMask))));
}

}  // namespace HWY_NAMESPACE
}  // namespace drift
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
