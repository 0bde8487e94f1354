// WithUnusedParameter (see the header).
#include "dpscope/nn/unused_parameter.hpp"

namespace dpscope {

WithUnusedParameter::WithUnusedParameter(std::unique_ptr<Module> body, std::unique_ptr<Module> unused)
    : body_(std::move(body)), unused_(std::move(unused)) {
  DPS_CHECK(body_ && unused_, ErrorKind::kInvalidArgument, "WithUnusedParameter: null module");
  set_input_requires_grad(false);
  register_child("body", *body_);
  register_child("unused", *unused_);
}

std::unique_ptr<Module> WithUnusedParameter::clone_impl(const Device* device) const {
  return std::make_unique<WithUnusedParameter>(device ? body_->clone(*device) : body_->clone(),
                                               device ? unused_->clone(*device) : unused_->clone());
}

}  // namespace dpscope
