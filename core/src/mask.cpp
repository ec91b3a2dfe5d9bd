#include "flashlab/mask.hpp"

#include <sstream>

#include "flashlab/enum_names.hpp"
#include "flashlab/error.hpp"

namespace flashlab {

static const EnumNames<MaskKind, 6> kMaskNames{{MaskKind::none, "none"},       {MaskKind::prefix_lm, "prefix-lm"},
                                               {MaskKind::document, "document"}, {MaskKind::chunked, "chunked"},
                                               {MaskKind::dense, "dense"},       {MaskKind::prefix_lm, "prefix_lm"}};

std::string to_string(MaskKind kind) { return enum_name(kMaskNames, kind); }
MaskKind parse_mask_kind(const std::string& name) { return enum_parse(kMaskNames, name, "mask kind"); }

std::shared_ptr<const DenseMask> DenseMask::load(const std::string& path) {
  auto m = std::make_shared<DenseMask>();
  m->bits = read_npy_bool(path);
  m->source = path;
  return m;
}

Mask::Span Mask::document_of(int64_t t) const {
  int64_t begin = 0;
  for (int64_t len : doc_lengths) {
    if (t < begin + len) return {begin, begin + len};
    begin += len;
  }
  return {begin, begin};  // past the last document (validate() rules this out)
}

std::string Mask::describe() const {
  std::ostringstream s;
  s << to_string(kind);
  switch (kind) {
    case MaskKind::prefix_lm:
      s << " ";
      for (size_t b = 0; b < prefix.size(); ++b) s << (b ? "," : "") << prefix[b];
      break;
    case MaskKind::document: s << " (" << doc_lengths.size() << " docs)"; break;
    case MaskKind::chunked: s << " " << chunk; break;
    case MaskKind::dense: s << " " << (dense ? dense->source : std::string("(none)")); break;
    case MaskKind::none: break;
  }
  return s.str();
}

}  // namespace flashlab
