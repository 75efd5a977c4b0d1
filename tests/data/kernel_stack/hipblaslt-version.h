/*!\file
 * \brief hipblaslt-version.h provides the configured version and settings
 */

#pragma once
#ifndef _HIPBLASLT_VERSION_H_
#define _HIPBLASLT_VERSION_H_

/* clang-format off */
#define HIPBLASLT_VERSION_MAJOR     1
#define HIPBLASLT_VERSION_MINOR     0
#define HIPBLASLT_VERSION_PATCH     0
#define HIPBLASLT_VERSION_TWEAK     5a6f3b2e1c
/* clang-format on */

#endif /* _HIPBLASLT_VERSION_H_ */
