//===- HostDevice.cpp - The device model's stages on the host -------------===//

#include "kernels/device/HostDevice.h"
#include "kernels/device/DeviceStage.h"

using namespace stagecraft::kernels;

StageFactory stagecraft::kernels::device::hostDeviceStages() {
  StageFactory f = hostStages();
  f.make = [](const ModelConfig &c, int index, int numStages, int firstLayer,
              int layers) -> llvm::Expected<std::unique_ptr<LayerStage>> {
    return std::make_unique<DeviceStage<HostDevice>>(
        std::make_unique<HostDevice>(/*trustForeign=*/true), c, index,
        numStages, firstLayer, layers);
  };
  f.where = "host device";
  return f;
}
