// Upsampling (F.interpolate, nn.Upsample): every mode resamples each
// (sample, channel) plane alone from the same output size or scale factors,
// so it runs as it is on the channel-folded value [N, B*C, *] and keeps it
// folded (a member-leading value runs with the members folded into the
// batch dim, as pooling does). TorchScript inlines F.interpolate with one
// branch per input rank and mode, so every op of the family appears in
// every model that interpolates: nearest, nearest-exact, (bi/tri)linear,
// bicubic and their antialiased forms, 1-D to 3-D, in the .vec form
// interpolate calls and the per-size form tracing records. ("area" is
// adaptive average pooling: rules/pool.cpp.)
//
//   %y = aten::upsample_bilinear2d(%x, %size, %align_corners, %scales)
//     ->  %y = aten::upsample_bilinear2d(%x, %size, %align_corners, %scales)   # x Folded
#include "passes/fuse/rules/rules.h"

namespace hfta {

std::vector<Rule> rules::upsample() {
  return {
      {"aten::upsample_nearest1d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors) -> Tensor",
       fuseChannelwise},
      {"aten::upsample_nearest2d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors) -> Tensor",
       fuseChannelwise},
      {"aten::upsample_nearest3d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors) -> Tensor",
       fuseChannelwise},
      {"aten::_upsample_nearest_exact1d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors) -> Tensor",
       fuseChannelwise},
      {"aten::_upsample_nearest_exact2d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors) -> Tensor",
       fuseChannelwise},
      {"aten::_upsample_nearest_exact3d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors) -> Tensor",
       fuseChannelwise},
      {"aten::upsample_linear1d.vec(Tensor input, SymInt[]? output_size, bool align_corners, float[]? "
       "scale_factors) -> Tensor",
       fuseChannelwise},
      {"aten::upsample_bilinear2d.vec(Tensor input, SymInt[]? output_size, bool align_corners, float[]? "
       "scale_factors) -> Tensor",
       fuseChannelwise},
      {"aten::upsample_bicubic2d.vec(Tensor input, SymInt[]? output_size, bool align_corners, float[]? "
       "scale_factors) -> Tensor",
       fuseChannelwise},
      {"aten::upsample_trilinear3d.vec(Tensor input, SymInt[]? output_size, bool align_corners, float[]? "
       "scale_factors) -> Tensor",
       fuseChannelwise},
      {"aten::_upsample_bilinear2d_aa.vec(Tensor input, SymInt[]? output_size, bool align_corners, float[]? "
       "scale_factors) -> Tensor",
       fuseChannelwise},
      {"aten::_upsample_bicubic2d_aa.vec(Tensor input, SymInt[]? output_size, bool align_corners, float[]? "
       "scale_factors) -> Tensor",
       fuseChannelwise},
      // The forms with one output size per dim (what tracing records).
      {"aten::upsample_nearest1d(Tensor self, SymInt[1] output_size, float? scales=None) -> Tensor", fuseChannelwise},
      {"aten::upsample_nearest2d(Tensor self, SymInt[2] output_size, float? scales_h=None, float? scales_w=None) -> "
       "Tensor",
       fuseChannelwise},
      {"aten::upsample_nearest3d(Tensor self, SymInt[3] output_size, float? scales_d=None, float? scales_h=None, "
       "float? scales_w=None) -> Tensor",
       fuseChannelwise},
      {"aten::_upsample_nearest_exact1d(Tensor self, SymInt[1] output_size, float? scales=None) -> Tensor",
       fuseChannelwise},
      {"aten::_upsample_nearest_exact2d(Tensor self, SymInt[2] output_size, float? scales_h=None, float? "
       "scales_w=None) -> Tensor",
       fuseChannelwise},
      {"aten::_upsample_nearest_exact3d(Tensor self, SymInt[3] output_size, float? scales_d=None, float? "
       "scales_h=None, float? scales_w=None) -> Tensor",
       fuseChannelwise},
      {"aten::upsample_linear1d(Tensor self, SymInt[1] output_size, bool align_corners, float? scales=None) -> "
       "Tensor",
       fuseChannelwise},
      {"aten::upsample_bilinear2d(Tensor self, SymInt[2] output_size, bool align_corners, float? scales_h=None, "
       "float? scales_w=None) -> Tensor",
       fuseChannelwise},
      {"aten::upsample_bicubic2d(Tensor self, SymInt[2] output_size, bool align_corners, float? scales_h=None, "
       "float? scales_w=None) -> Tensor",
       fuseChannelwise},
      {"aten::upsample_trilinear3d(Tensor self, SymInt[3] output_size, bool align_corners, float? scales_d=None, "
       "float? scales_h=None, float? scales_w=None) -> Tensor",
       fuseChannelwise},
      {"aten::_upsample_bilinear2d_aa(Tensor self, SymInt[2] output_size, bool align_corners, float? "
       "scales_h=None, float? scales_w=None) -> Tensor",
       fuseChannelwise},
      {"aten::_upsample_bicubic2d_aa(Tensor self, SymInt[2] output_size, bool align_corners, float? scales_h=None, "
       "float? scales_w=None) -> Tensor",
       fuseChannelwise},
  };
}

}  // namespace hfta
